package dev.artemisrdma.artemis;

import java.lang.invoke.MethodHandles;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Points the shared RDMA runtime at a test fabric, once per JVM: the transport protocol on the in-memory
 * {@code FakeFabric} when it is on the test classpath, otherwise (or with {@code -Dartemis.rdma.test=loopback}) the
 * adapter-only {@link LoopbackTransport}.
 */
final class TestRuntime {

    private static final Logger logger = LoggerFactory.getLogger(MethodHandles.lookup().lookupClass());
    private static boolean installed;

    private TestRuntime() {
    }

    static synchronized void install() {
        if (installed) {
            return;
        }
        boolean loopback = "loopback".equals(System.getProperty("artemis.rdma.test")) || !FakeFabricSupplier.available();
        if (loopback) {
            System.setProperty(RdmaRuntime.FABRIC_PROPERTY, NoFabric.class.getName());
            RdmaRuntime.setOpener((fabric, settings) -> new LoopbackTransport());
        } else {
            System.setProperty(RdmaRuntime.FABRIC_PROPERTY, FakeFabricSupplier.class.getName());
        }
        logger.info("tests run on {}", loopback ? "the loopback transport" : "RdmaTransport over FakeFabric");
        installed = true;
    }
}
