package dev.artemisrdma.artemis;

import java.lang.invoke.MethodHandles;
import java.net.InetSocketAddress;
import java.util.Map;
import java.util.concurrent.Executor;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import org.apache.activemq.artemis.spi.core.remoting.AbstractConnector;
import org.apache.activemq.artemis.spi.core.remoting.BufferHandler;
import org.apache.activemq.artemis.spi.core.remoting.ClientConnectionLifeCycleListener;
import org.apache.activemq.artemis.spi.core.remoting.ClientProtocolManager;
import org.apache.activemq.artemis.spi.core.remoting.Connection;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Connects a client to an RDMA acceptor. Holds a lease on the shared runtime from start to close. With sslEnabled its
 * TLS keys are checked when it is made and its stores loaded when it starts (as NettyConnector reads the
 * {@code javax.net.ssl.*} system properties when it starts), once for all its connections.
 *
 * <p>Threads: Artemis's session factory calls {@link #start}, {@link #createConnection} and {@link #close} (not
 * always on one thread), and a connection reported lost releases the lease from the thread that reports it. The
 * lease, the TLS engines, the metrics group and the batch flusher are guarded by this object's lock;
 * {@code createConnection} holds it only to read them and connects outside it. The last connection and whether the
 * last attempt failed are volatile.
 */
final class RdmaConnector extends AbstractConnector {

    private static final Logger logger = LoggerFactory.getLogger(MethodHandles.lookup().lookupClass());

    private final BufferHandler handler;
    private final ClientConnectionLifeCycleListener listener;
    private final Executor closeExecutor;
    private final ScheduledExecutorService scheduler;
    private final ClientProtocolManager protocolManager;
    private final InetSocketAddress target;
    private final TransportConfig transportConfig;
    private final int batchDelay;
    /** The TLS keys, checked; null without TLS. */
    private final TlsEngines.Settings tlsSettings;
    /** Made from {@link #tlsSettings} by the first {@link #start()}; null without TLS. */
    private TlsEngines tls;
    private RdmaRuntime.Lease lease;
    private ClientMetrics.Group metrics;
    private ScheduledFuture<?> batchFlusher;
    private volatile RdmaConnection lastConnection;
    /** The last attempt failed: Artemis will retry with a new connector (see {@link #close()}). */
    private volatile boolean attemptFailed;

    RdmaConnector(Map<String, Object> configuration, TransportConfig transportConfig, BufferHandler handler,
                  ClientConnectionLifeCycleListener listener, Executor closeExecutor, ScheduledExecutorService scheduler,
                  ClientProtocolManager protocolManager) {
        super(configuration);
        this.handler = handler;
        this.listener = listener;
        this.closeExecutor = closeExecutor;
        this.scheduler = scheduler;
        this.protocolManager = protocolManager;
        this.target = new InetSocketAddress(RdmaParameters.host(configuration), RdmaParameters.port(configuration));
        this.batchDelay = RdmaParameters.batchDelay(configuration);
        this.transportConfig = transportConfig;
        try {
            this.tlsSettings = TlsEngines.settings(TlsEngines.Side.CONNECTOR, configuration);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("RDMA connector: " + e.getMessage(), e);
        }
    }

    @Override
    public synchronized void start() {
        if (lease != null) {
            return;
        }
        if (tlsSettings != null && tls == null) {
            try {
                tls = new TlsEngines(tlsSettings);
            } catch (IllegalArgumentException | IllegalStateException e) {
                // as a NettyConnector whose stores cannot be read: no connection, the reason in the log
                logger.error("RDMA connector to {}: TLS cannot be set up: {}", target, e.getMessage());
                logger.debug("RDMA connector to {}: TLS set-up failure", target, e);
                return;
            }
        }
        try {
            lease = RdmaRuntime.acquire(transportConfig);
            metrics = ClientMetrics.join(RdmaParameters.metricsName(configuration), lease.transport());
        } catch (FabricException e) {
            // a machine without an RDMA device, librdmacm or memlock: the message says what to fix, and a client
            // with a tcp:// fall-back goes on to it, so no stack trace on every connect
            logger.error("RDMA connector to {}: cannot open the RDMA transport: {}", target, e.getMessage());
            logger.debug("RDMA connector to {}: transport set-up failure", target, e);
        } catch (RuntimeException e) {
            logger.error("RDMA connector to {}: cannot open the RDMA transport: {}", target, e.getMessage(), e);
        }
    }

    @Override
    public synchronized boolean isStarted() {
        return lease != null;
    }

    /** A new connection to the target, or null (never an exception) if it cannot be made. */
    @Override
    public Connection createConnection() {
        RdmaRuntime.Lease current;
        EndpointMetrics counting;
        TlsEngines engines;
        synchronized (this) {
            current = lease;
            engines = tls;
            counting = metrics == null ? null : metrics.metrics();
        }
        if (current == null) {
            return null;
        }
        LeaseOnLoss reporting = new LeaseOnLoss();
        RdmaConnection connection = new RdmaConnection(configuration, handler, reporting, closeExecutor, batchDelay,
                false);
        reporting.connection = connection;
        RdmaChannel channel;
        try {
            ChannelHandler tracked = counting == null ? connection : counting.track(connection);
            channel = current.transport().connect(target, tracked, engines);
        } catch (FabricException | RuntimeException e) {
            // AddressingException among them: a configuration the fabric cannot serve is reported the same way
            attemptFailed = true;
            ConnectOutages.jvm().failed(target.toString(), e.getMessage());
            return null;
        }
        connection.bind(channel);
        if (counting != null) {
            counting.add(channel);
        }
        if (!channel.isOpen()) {
            attemptFailed = true;
            ConnectOutages.jvm().failed(target.toString(), "connection " + channel.id() + " closed while connecting");
            return null;
        }
        attemptFailed = false;
        ConnectOutages.jvm().connected(target.toString());
        listener.connectionCreated(null, connection, protocolManager);
        lastConnection = connection;
        scheduleBatchFlusher();
        logger.debug("RDMA connection {} to {} established", channel.id(), target);
        return connection;
    }

    private synchronized void scheduleBatchFlusher() {
        // lease null: close() ran while this connection was being made; a flusher now would never be cancelled
        if (batchDelay > 0 && batchFlusher == null && lease != null) {
            batchFlusher = scheduler.scheduleWithFixedDelay(() -> {
                RdmaConnection connection = lastConnection;
                if (connection != null) {
                    connection.checkFlushBatchBuffer();
                }
            }, batchDelay, batchDelay, TimeUnit.MILLISECONDS);
        }
    }

    /**
     * Releases the lease on the shared transport. After a failed attempt or a lost connection Artemis retries with a
     * new connector, so the transport is then left open briefly for that attempt instead of being rebuilt for it.
     */
    @Override
    public synchronized void close() {
        if (batchFlusher != null) {
            batchFlusher.cancel(false);
            batchFlusher = null;
        }
        if (lease != null) {
            RdmaConnection last = lastConnection;
            if (attemptFailed || (last != null && last.wasLost())) {
                lease.closeRetrying();
            } else {
                lease.close();
            }
            lease = null;
        }
    }

    /**
     * {@code lost} was this connector's connection and it failed: the lease goes now, kept open for a retry as
     * {@link #close()} would. Artemis closes the connector of a lost connection only when it reconnects; with
     * reconnectAttempts=0 it drops the connection and never closes the connector (ClientSessionFactoryImpl's
     * checkCloseConnection closes it only while a connection is set), which left the transport open for good.
     */
    private synchronized void released(RdmaConnection lost) {
        if (lost == null || lost != lastConnection || lease == null) {
            return;
        }
        if (batchFlusher != null) {
            batchFlusher.cancel(false);
            batchFlusher = null;
        }
        lease.closeRetrying();
        lease = null;
    }

    /** Artemis's listener, and then {@link #released} when the connection is reported lost. */
    private final class LeaseOnLoss implements ClientConnectionLifeCycleListener {
        volatile RdmaConnection connection;

        @Override
        public void connectionCreated(org.apache.activemq.artemis.core.server.ActiveMQComponent component,
                                      Connection created, ClientProtocolManager protocol) {
            listener.connectionCreated(component, created, protocol);
        }

        @Override
        public void connectionDestroyed(Object connectionID, boolean failed) {
            listener.connectionDestroyed(connectionID, failed);
            if (failed) {
                released(connection);
            }
        }

        @Override
        public void connectionException(Object connectionID, org.apache.activemq.artemis.api.core.ActiveMQException me) {
            listener.connectionException(connectionID, me);
        }

        @Override
        public void connectionReadyForWrites(Object connectionID, boolean ready) {
            listener.connectionReadyForWrites(connectionID, ready);
        }
    }

    @Override
    public boolean isEquivalent(Map<String, Object> otherConfiguration) {
        return RdmaParameters.sameEndpoint(configuration, otherConfiguration);
    }

    @Override
    public String toString() {
        return "RdmaConnector[" + target + "]";
    }
}
