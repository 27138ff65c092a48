package dev.artemisrdma.verbs;

/**
 * Start-up checks, run once before the first native object is created: the libraries load (with package names
 * when they do not), the shim's compiled layout matches the Java constants, and at least one RDMA device exists.
 */
public final class Rdma {

    private static volatile boolean ready;

    private Rdma() {
    }

    /** @throws RdmaSetupException with what is wrong and how to fix it */
    public static void ensureReady() {
        if (ready) {
            return;
        }
        synchronized (Rdma.class) {
            if (ready) {
                return;
            }
            touch(RdmaCm.LIBRARY);
            touch(IbVerbs.LIBRARY);
            touch(ShimLibrary.LIBRARY);
            ShimLibrary.registerDataPath(); // before DataPath's initialiser: a failure is then ours, not an
                                            // ExceptionInInitializerError
            AbiCheck.verify();
            ready = true;
        }
    }

    private static void touch(Object library) {
        if (library == null) {
            throw new RdmaSetupException("native library failed to initialise");
        }
    }

    /**
     * Loads and checks everything a connection needs, including that an RDMA device is present; returns the
     * device names. For start-up diagnostics (the acceptor and connector call it before they bind).
     */
    public static java.util.List<String> checkDevices() {
        ensureReady();
        try (RdmaDevices devices = RdmaDevices.open()) {
            return devices.names();
        } catch (VerbsException e) {
            throw new RdmaSetupException("cannot list RDMA devices: " + e.getMessage(), e);
        }
    }
}
