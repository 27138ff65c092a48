package dev.artemisrdma.artemis;

import java.lang.invoke.MethodHandles;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Supplier;

import dev.artemisrdma.transport.Fabric;
import dev.artemisrdma.transport.FabricException;
import dev.artemisrdma.transport.verbs.VerbsFabric;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The process-wide RDMA runtime: one {@link Fabric}, and one transport per distinct set of tuning settings, shared by
 * every acceptor and connector in the JVM and reference-counted: created by the first {@link #acquire}, closed when the
 * last {@link Lease} is closed.
 *
 * <p><b>Choosing the fabric.</b> The system property {@value #FABRIC_PROPERTY} names a public class with a public
 * no-argument constructor implementing {@code java.util.function.Supplier<dev.artemisrdma.transport.Fabric>}; it is
 * read each time the fabric is (re)created. Unset, the real verbs fabric ({@link VerbsFabric}) is used. Tests set it
 * to a supplier of the in-memory fake fabric.
 *
 * <p><b>Closing.</b> The last lease closes its transport, and the last transport the fabric, outside the global lock:
 * a close may wait for peers, and must not hold up every other acceptor and connector of the JVM meanwhile.
 */
public final class RdmaRuntime {

    /** System property naming a {@code Supplier<Fabric>} class to use instead of the verbs fabric. */
    public static final String FABRIC_PROPERTY = "dev.artemisrdma.fabric";

    private static final Logger logger = LoggerFactory.getLogger(MethodHandles.lookup().lookupClass());
    private static final Object LOCK = new Object();
    private static final Map<Map<String, Object>, Shared> transports = new HashMap<>();
    private static Fabric fabric;
    /** Transports closing outside the lock: the fabric stays until they are done. */
    private static int closing;

    private RdmaRuntime() {
    }

    /** A share of the runtime: the transport for one set of settings, until closed. */
    static final class Lease implements AutoCloseable {
        private final Shared shared;
        private boolean closed;

        private Lease(Shared shared) {
            this.shared = shared;
        }

        ChannelTransport transport() {
            return shared.transport;
        }

        @Override
        public void close() {
            synchronized (LOCK) {
                if (closed) {
                    return;
                }
                closed = true;
                if (--shared.leases > 0) {
                    return;
                }
                transports.remove(shared.settings);
                closing++;
            }
            Fabric unused = null;
            try {
                shared.transport.close();
                logger.debug("RDMA transport with settings {} closed", shared.settings);
            } finally {
                synchronized (LOCK) {
                    if (--closing == 0 && transports.isEmpty() && fabric != null) {
                        unused = fabric;
                        fabric = null;
                    }
                }
            }
            if (unused != null) {
                closeFabric(unused);
            }
        }
    }

    private static final class Shared {
        final Map<String, Object> settings;
        final ChannelTransport transport;
        int leases;

        Shared(Map<String, Object> settings, ChannelTransport transport) {
            this.settings = settings;
            this.transport = transport;
        }
    }

    /**
     * A lease on the transport for {@code settings} (transport tuning keys only), creating the fabric and the
     * transport if this is their first user.
     *
     * @throws FabricException if the fabric cannot be opened or the settings are invalid (the message names the key)
     */
    static Lease acquire(Map<String, Object> settings) throws FabricException {
        synchronized (LOCK) {
            Shared shared = transports.get(settings);
            if (shared == null) {
                boolean newFabric = fabric == null;
                if (newFabric) {
                    fabric = createFabric();
                }
                try {
                    shared = new Shared(Map.copyOf(settings), TransportAdapter.open(fabric, settings));
                } catch (RuntimeException e) {
                    if (newFabric) {
                        closeFabric(fabric);
                        fabric = null;
                    }
                    throw e;
                }
                transports.put(shared.settings, shared);
                logger.debug("RDMA transport opened with settings {}", settings);
            }
            shared.leases++;
            return new Lease(shared);
        }
    }

    private static void closeFabric(Fabric unused) {
        unused.close();
        logger.debug("RDMA fabric {} closed", unused);
    }

    private static Fabric createFabric() throws FabricException {
        String supplierClass = System.getProperty(FABRIC_PROPERTY);
        try {
            if (supplierClass != null && !supplierClass.isBlank()) {
                @SuppressWarnings("unchecked")
                Supplier<Fabric> supplier = (Supplier<Fabric>) loadClass(supplierClass.trim())
                        .getConstructor().newInstance();
                Fabric created = supplier.get();
                logger.info("RDMA fabric from {}={}: {}", FABRIC_PROPERTY, supplierClass, created);
                return created;
            }
            // Our own class, not loaded by name: in OSGi or an application server the context class loader may
            // see another copy of the connector, whose VerbsFabric would not be our Fabric.
            return new VerbsFabric();
        } catch (ReflectiveOperationException | ClassCastException | LinkageError e) {
            Throwable cause = e.getCause() != null && e instanceof ReflectiveOperationException ? e.getCause() : e;
            String source = supplierClass != null ? FABRIC_PROPERTY + "=" + supplierClass : "VerbsFabric";
            throw new FabricException("cannot open the RDMA fabric (" + source + "): " + cause, cause);
        } catch (RuntimeException e) {
            // start-up checks (no device, libraries missing, ABI mismatch) say what to do: keep their message
            throw new FabricException("cannot open the RDMA fabric: " + e.getMessage(), e);
        }
    }

    private static Class<?> loadClass(String name) throws ClassNotFoundException {
        ClassLoader context = Thread.currentThread().getContextClassLoader();
        if (context != null) {
            try {
                return Class.forName(name, true, context);
            } catch (ClassNotFoundException ignored) {
                // fall back to our own loader
            }
        }
        return Class.forName(name, true, RdmaRuntime.class.getClassLoader());
    }

    /** Number of open transports (for tests and diagnostics). */
    static int openTransports() {
        synchronized (LOCK) {
            return transports.size();
        }
    }
}
