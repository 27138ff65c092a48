package dev.artemisrdma.artemis;

/** Points the shared RDMA runtime at the test transport, once per JVM. */
final class TestRuntime {

    private static boolean installed;

    private TestRuntime() {
    }

    static synchronized void install() {
        if (!installed) {
            System.setProperty(RdmaRuntime.FABRIC_PROPERTY, NoFabric.class.getName());
            RdmaRuntime.setOpener((fabric, settings) -> new LoopbackTransport());
            installed = true;
        }
    }
}
