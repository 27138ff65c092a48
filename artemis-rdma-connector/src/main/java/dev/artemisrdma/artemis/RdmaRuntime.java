package dev.artemisrdma.artemis;

import java.lang.invoke.MethodHandles;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.Fabric;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.verbs.VerbsFabric;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The process-wide RDMA runtime: one {@link Fabric}, and one transport per distinct {@link TransportConfig} value,
 * shared by every acceptor and connector in the JVM and reference-counted: created by the first {@link #acquire},
 * closed when the last {@link Lease} is closed.
 *
 * <p><b>Choosing the fabric.</b> The system property {@value #FABRIC_PROPERTY} names a public class with a public
 * no-argument constructor implementing {@code java.util.function.Supplier<dev.artemisrdma.transport.fabric.Fabric>}; it is
 * read each time the fabric is (re)created. Unset, the real verbs fabric ({@link VerbsFabric}) is used. Tests set it
 * to a supplier of the in-memory fake fabric.
 *
 * <p><b>Closing.</b> The last lease closes its transport, and the last transport the fabric, outside the global lock:
 * a close may wait for peers, and must not hold up every other acceptor and connector of the JVM meanwhile.
 *
 * <p><b>Reconnecting.</b> Artemis makes a new connector for every connection attempt and closes it when the attempt
 * fails, so a client, bridge or cluster link retrying an unreachable peer every 100 ms would open and close a whole
 * transport (fabric, completion loops, registered memory) each time. A lease closed {@linkplain Lease#closeRetrying()
 * while its connector is retrying} therefore keeps its transport open for {@value #RETRY_LINGER_MS} ms without
 * leases; the next attempt's {@link #acquire} takes it up again, and it closes once no attempt came in that time.
 */
public final class RdmaRuntime {

    /** System property naming a {@code Supplier<Fabric>} class to use instead of the verbs fabric. */
    public static final String FABRIC_PROPERTY = "dev.artemisrdma.fabric";

    private static final Logger logger = LoggerFactory.getLogger(MethodHandles.lookup().lookupClass());
    private static final Object LOCK = new Object();
    /**
     * Keyed by the typed configuration's value, not by the parameters as written: a key spelled out with its default,
     * or a size written {@code 65536} or {@code 64k}, is the same transport as the key left out.
     */
    private static final Map<TransportConfig, Shared> transports = new HashMap<>();
    private static Fabric fabric;
    /** Transports closing outside the lock: the fabric stays until they are done. */
    private static int closing;
    /** How long a transport whose last lease was closed by a retrying connector stays open for the next attempt. */
    static final long RETRY_LINGER_MS = 5_000;
    private static ScheduledExecutorService lingerTimer;
    /** Transports opened since the JVM started (diagnostics; tests count rebuilds with it). */
    private static long opened;

    private RdmaRuntime() {
    }

    /** A share of the runtime: the transport for one configuration, until closed. */
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
                if (!releaseLastLeaseLocked()) {
                    return;
                }
                transports.remove(shared.config);
                closing++;
            }
            retire(shared);
        }

        /** Ends this lease (once); true when it was the transport's last. Under {@link #LOCK}. */
        private boolean releaseLastLeaseLocked() {
            if (closed) {
                return false;
            }
            closed = true;
            return --shared.leases == 0;
        }

        /**
         * Closes this lease for a connector whose connection attempt failed or whose connection was lost: Artemis
         * will try again with a new connector, so the last lease leaves the transport open for
         * {@value #RETRY_LINGER_MS} ms for it (see the class comment).
         */
        void closeRetrying() {
            synchronized (LOCK) {
                if (!releaseLastLeaseLocked()) {
                    return;
                }
                if (lingerTimer == null) {
                    lingerTimer = Executors.newSingleThreadScheduledExecutor(runnable -> {
                        Thread thread = new Thread(runnable, "rdma-runtime-linger");
                        thread.setDaemon(true);
                        return thread;
                    });
                }
                Shared lingering = shared;
                lingering.pendingClose = lingerTimer.schedule(() -> closeIfUnused(lingering), RETRY_LINGER_MS,
                        TimeUnit.MILLISECONDS);
                logger.debug("RDMA transport with {} kept open {} ms for a retrying connector",
                        lingering.config, RETRY_LINGER_MS);
            }
        }
    }

    /** The linger of a transport ran out: closes it unless an attempt took it up again meanwhile. */
    private static void closeIfUnused(Shared shared) {
        synchronized (LOCK) {
            if (shared.leases > 0 || shared.pendingClose == null || transports.get(shared.config) != shared) {
                return;
            }
            shared.pendingClose = null;
            transports.remove(shared.config);
            closing++;
        }
        try {
            retire(shared);
        } catch (RuntimeException e) {
            logger.warn("RDMA transport with {}: closing it after its linger failed: {}", shared.config,
                    e.toString());
        }
    }

    /** Closes a transport taken out of the map (closing counted), and the fabric if it was the last one. */
    private static void retire(Shared shared) {
        Fabric unused = null;
        try {
            shared.transport.close();
            logger.debug("RDMA transport with {} closed", shared.config);
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

    private static final class Shared {
        final TransportConfig config;
        final ChannelTransport transport;
        int leases;
        /** The close scheduled when the last lease was closed by a retrying connector; null otherwise. */
        ScheduledFuture<?> pendingClose;

        Shared(TransportConfig config, ChannelTransport transport) {
            this.config = config;
            this.transport = transport;
        }
    }

    /**
     * A lease on the transport for {@code config}, creating the fabric and the transport if this is their first user.
     *
     * @throws FabricException if the fabric cannot be opened
     */
    static Lease acquire(TransportConfig config) throws FabricException {
        synchronized (LOCK) {
            Shared shared = transports.get(config);
            if (shared == null) {
                boolean newFabric = fabric == null;
                if (newFabric) {
                    fabric = createFabric();
                }
                try {
                    shared = new Shared(config, TransportAdapter.open(fabric, config));
                } catch (RuntimeException e) {
                    if (newFabric) {
                        closeFabric(fabric);
                        fabric = null;
                    }
                    throw e;
                }
                transports.put(config, shared);
                opened++;
                logger.debug("RDMA transport opened with {}", config);
            }
            if (shared.pendingClose != null) { // a retrying connector's next attempt: the transport stays
                shared.pendingClose.cancel(false);
                shared.pendingClose = null;
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

    /** Transports opened since the JVM started (for tests and diagnostics). */
    static long transportsOpened() {
        synchronized (LOCK) {
            return opened;
        }
    }

    /** Closes at once the transports kept open for retrying connectors (for tests). */
    static void closeLingering() {
        List<Shared> due = new ArrayList<>();
        synchronized (LOCK) {
            for (Shared shared : transports.values()) {
                if (shared.leases == 0 && shared.pendingClose != null) {
                    shared.pendingClose.cancel(false);
                    shared.pendingClose = null;
                    due.add(shared);
                }
            }
            due.forEach(shared -> transports.remove(shared.config));
            closing += due.size();
        }
        due.forEach(RdmaRuntime::retire);
    }

    /** Number of open transports (for tests and diagnostics). */
    static int openTransports() {
        synchronized (LOCK) {
            return transports.size();
        }
    }
}
