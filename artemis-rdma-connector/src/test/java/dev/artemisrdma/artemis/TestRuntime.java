package dev.artemisrdma.artemis;

/** Points the shared RDMA runtime at the in-memory {@code FakeFabric}, once per JVM: the real transport protocol. */
final class TestRuntime {

    private static boolean installed;

    private TestRuntime() {
    }

    static synchronized void install() {
        if (installed) {
            return;
        }
        System.setProperty(RdmaRuntime.FABRIC_PROPERTY, FakeFabricSupplier.class.getName());
        installed = true;
    }
}
