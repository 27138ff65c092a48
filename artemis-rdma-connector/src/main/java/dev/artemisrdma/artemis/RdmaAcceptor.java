package dev.artemisrdma.artemis;

import java.lang.invoke.MethodHandles;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.BoundedClose;
import dev.artemisrdma.transport.ChannelAcceptor;
import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.LogLimiter;
import org.apache.activemq.artemis.api.core.ActiveMQException;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.api.core.management.CoreNotificationType;
import org.apache.activemq.artemis.core.remoting.impl.AbstractAcceptor;
import org.apache.activemq.artemis.core.security.ActiveMQPrincipal;
import org.apache.activemq.artemis.core.server.ActiveMQComponent;
import org.apache.activemq.artemis.core.server.cluster.ClusterConnection;
import org.apache.activemq.artemis.core.server.management.Notification;
import org.apache.activemq.artemis.core.server.management.NotificationService;
import org.apache.activemq.artemis.core.server.metrics.MetricsManager;
import org.apache.activemq.artemis.spi.core.protocol.ProtocolManager;
import org.apache.activemq.artemis.spi.core.remoting.BufferHandler;
import org.apache.activemq.artemis.spi.core.remoting.Connection;
import org.apache.activemq.artemis.spi.core.remoting.ServerConnectionLifeCycleListener;
import org.apache.activemq.artemis.utils.collections.TypedProperties;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

/**
 * Accepts RDMA connections for the broker and hands each to the CORE protocol manager (no protocol detection, no
 * handshake). Holds a lease on the shared runtime from start to stop.
 *
 * <p>Beyond {@code connectionsAllowed} open connections, new ones are refused with the reason. Stopping closes the
 * connections in parallel ({@link BoundedClose}): it waits at most closeTimeout + 1 s for their orderly closes before
 * disconnecting the rest, so peers that withhold credits or have hung cannot hold up a broker's stop.
 *
 * <p>Threads: Artemis's management threads start, pause and stop it under this object's monitor; connections arrive
 * on the fabric's connection-manager thread and open on their completion loops, reading the listener and metrics
 * through volatile fields. {@link #reload()} (the broker's reload manager or management) swaps the TLS context,
 * which the transport's threads read through {@link TlsEngines}' volatile reference.
 */
final class RdmaAcceptor extends AbstractAcceptor {

    private static final Logger logger = LoggerFactory.getLogger(MethodHandles.lookup().lookupClass());
    /** What a peer can make us log at will: LogLimiter.LINES lines per interval, then a summary. */
    private static final LogLimiter REFUSED = LogLimiter.site(logger, Level.WARN,
            "connections refused at the connection limit");

    private final String name;
    private final ClusterConnection clusterConnection;
    private final Map<String, Object> configuration;
    private final TransportConfig transportConfig;
    private final BufferHandler handler;
    private final ServerConnectionLifeCycleListener listener;
    private final Executor threadPool;
    private final ScheduledExecutorService scheduler;
    private final ProtocolManager core;
    private final InetSocketAddress address;
    private final int batchDelay;
    private final boolean directDeliver;
    private final int connectionsAllowed;
    /** The acceptor's TLS (its context reloaded by {@link #reload()}), null without; made once, not per connection. */
    private final TlsEngines tls;
    private final Map<Object, RdmaConnection> connections = new ConcurrentHashMap<>();
    private final ServerConnectionLifeCycleListener tracker = new Tracker();
    private final MetricsManager metricsManager;
    private RdmaRuntime.Lease lease;
    private volatile EndpointMetrics metrics;
    private AcceptorMonitoring monitoring;
    private volatile RdmaServer listening;
    private ScheduledFuture<?> batchFlusher;
    private NotificationService notificationService;
    private boolean started;

    RdmaAcceptor(String name, ClusterConnection clusterConnection, Map<String, Object> configuration,
                 TransportConfig transportConfig, BufferHandler handler, ServerConnectionLifeCycleListener listener,
                 Executor threadPool, ScheduledExecutorService scheduler, Map<String, ProtocolManager> protocolMap,
                 ProtocolManager core, MetricsManager metricsManager) {
        super(protocolMap);
        this.metricsManager = metricsManager;
        this.name = name;
        this.clusterConnection = clusterConnection;
        this.configuration = configuration;
        this.transportConfig = transportConfig;
        this.handler = handler;
        this.listener = listener;
        this.threadPool = threadPool;
        this.scheduler = scheduler;
        this.core = core;
        this.address = new InetSocketAddress(RdmaParameters.host(configuration), RdmaParameters.port(configuration));
        this.batchDelay = RdmaParameters.batchDelay(configuration);
        this.directDeliver = RdmaParameters.directDeliver(configuration);
        this.connectionsAllowed = RdmaParameters.connectionsAllowed(configuration);
        this.tls = tls(name, configuration);
    }

    /**
     * The TLS of the acceptor configured with {@code configuration}, its stores loaded now as NettyAcceptor loads them
     * when it is made: a store that cannot be used refuses this acceptor (the broker logs it and starts without it),
     * naming the key.
     */
    private static TlsEngines tls(String name, Map<String, Object> configuration) {
        try {
            return TlsEngines.acceptor(configuration);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("RDMA acceptor '" + name + "': " + e.getMessage(), e);
        } catch (IllegalStateException e) {
            throw new IllegalStateException("RDMA acceptor '" + name + "': " + e.getMessage(), e);
        }
    }

    @Override
    public synchronized void start() throws Exception {
        if (started) {
            return;
        }
        lease = RdmaRuntime.acquire(transportConfig);
        ChannelTransport transport = lease.transport();
        metrics = new EndpointMetrics(() -> transport);
        try {
            listening = transport.listen(address, new ChannelAcceptor() {
                @Override
                public void admit(RdmaChannel channel) {
                    checkConnectionLimit(channel);
                }

                @Override
                public ChannelHandler onAccepted(RdmaChannel channel) {
                    return accepted(channel);
                }
            }, tls);
        } catch (Exception e) {
            lease.close();
            lease = null;
            metrics = null;
            throw new IllegalStateException("RDMA acceptor '" + name + "' cannot listen on " + address + ": "
                    + e.getMessage(), e);
        }
        if (batchDelay > 0) {
            batchFlusher = scheduler.scheduleWithFixedDelay(this::flushBatches, batchDelay, batchDelay,
                    TimeUnit.MILLISECONDS);
        }
        if (listening instanceof RdmaServer) {
            metrics.listenerStats(((RdmaServer) listening).stats());
        }
        monitoring = AcceptorMonitoring.publish(name, metrics, metricsManager, notificationService);
        started = true;
        notify(CoreNotificationType.ACCEPTOR_STARTED);
        logger.info("RDMA acceptor '{}' listening on {}:{}{}", name, address.getHostString(), getActualPort(),
                tls != null ? " with TLS" : "");
    }

    /**
     * A connection request arrived: refused (the message going to the peer as the reason) when {@code
     * connectionsAllowed} connections are open. Checked again once the connection is established, since others
     * may have been established meanwhile.
     */
    private void checkConnectionLimit(RdmaChannel channel) {
        if (connectionsAllowed != -1 && connections.size() >= connectionsAllowed) {
            if (REFUSED.admit()) {
                logger.warn("RDMA acceptor '{}': refused a connection from {}: {}={} connections are open (raise it to"
                        + " allow more)", name, channel.remoteAddress(), RdmaParameters.CONNECTIONS_ALLOWED,
                        connectionsAllowed);
            }
            throw new IllegalStateException("connection limit of " + connectionsAllowed + " reached (raise "
                    + RdmaParameters.CONNECTIONS_ALLOWED + ")");
        }
    }

    /**
     * The connection is established: Artemis's {@link Connection} is made now, not at the request, so that a peer
     * that never finishes connecting costs the broker no connection, no entry in its connection table and no TTL
     * check. Throwing closes the connection.
     */
    private ChannelHandler accepted(RdmaChannel channel) {
        checkConnectionLimit(channel);
        RdmaConnection connection = new RdmaConnection(RdmaParameters.connectorParams(configuration), handler,
                tracker, threadPool, batchDelay, directDeliver).bind(channel);
        connections.put(connection.getID(), connection);
        try {
            tracker.connectionCreated(this, connection, core);
        } catch (RuntimeException | Error e) {
            connections.remove(connection.getID()); // the transport refuses the channel: nothing else will
            throw e;
        }
        logger.debug("RDMA acceptor '{}' accepted connection {} from {}", name, channel.id(),
                channel.remoteAddress());
        EndpointMetrics counting = metrics;
        if (counting == null) {
            return connection; // stopping
        }
        counting.add(channel);
        return counting.track(connection);
    }

    private void flushBatches() {
        for (RdmaConnection connection : connections.values()) {
            connection.checkFlushBatchBuffer();
        }
    }

    /** Stops accepting new connections; established ones go on. */
    @Override
    public synchronized void pause() {
        closeListener();
    }

    private void closeListener() {
        RdmaServer closing = listening;
        listening = null;
        if (closing != null) {
            try {
                closing.close();
            } catch (Exception e) {
                logger.warn("RDMA acceptor '{}': closing the listener on {} failed: {}", name, address,
                        e.getMessage(), e);
            }
        }
    }

    @Override
    public synchronized void stop() {
        if (!started) {
            return;
        }
        closeListener();
        if (batchFlusher != null) {
            batchFlusher.cancel(false);
            batchFlusher = null;
        }
        BoundedClose.closeAll("RDMA acceptor '" + name + "'", new ArrayList<>(connections.values()),
                c -> c.getID() + " to " + c.getRemoteAddress(),
                RdmaConnection::destroy, BoundedClose.channelOrderlyBound(transportConfig),
                c -> c.channel().forceClose(), BoundedClose.channelForcedBound());
        connections.clear();
        monitoring.close();
        monitoring = null;
        metrics = null;
        lease.close();
        lease = null;
        started = false;
        logger.info("RDMA acceptor '{}' on {} stopped", name, address);
    }

    @Override
    public void notifyStop() {
        notify(CoreNotificationType.ACCEPTOR_STOPPED);
    }

    private void notify(CoreNotificationType type) {
        NotificationService service;
        synchronized (this) {
            service = notificationService;
        }
        if (service == null) {
            return;
        }
        TypedProperties props = new TypedProperties();
        props.putSimpleStringProperty(SimpleString.of("factory"), SimpleString.of(RdmaAcceptorFactory.class.getName()));
        props.putSimpleStringProperty(SimpleString.of("host"), SimpleString.of(address.getHostString()));
        props.putIntProperty(SimpleString.of("port"), getActualPort());
        try {
            service.sendNotification(new Notification(null, type, props));
        } catch (Exception e) {
            logger.warn("RDMA acceptor '{}': sending the {} notification failed: {}", name, type, e.getMessage());
        }
    }

    @Override
    public synchronized boolean isStarted() {
        return started;
    }

    @Override
    public String getName() {
        return name;
    }

    @Override
    public ClusterConnection getClusterConnection() {
        return clusterConnection;
    }

    @Override
    public Map<String, Object> getConfiguration() {
        return configuration;
    }

    @Override
    public synchronized void setNotificationService(NotificationService notificationService) {
        this.notificationService = notificationService;
    }

    @Override
    public void setDefaultActiveMQPrincipal(ActiveMQPrincipal defaultActiveMQPrincipal) {
        // only unsecurable (in-VM) acceptors take a default principal
    }

    @Override
    public boolean isUnsecurable() {
        return false;
    }

    /**
     * Loads the key and trust stores again (Artemis calls this when they change, with sslAutoReload, or from the
     * acceptor's management control): connections accepted from now on use the new ones, established ones go on.
     * Stores that cannot be used leave the old ones in place and are refused naming the key. Nothing to do without
     * TLS.
     */
    @Override
    public void reload() {
        if (tls == null) {
            return;
        }
        try {
            tls.reload();
        } catch (IllegalArgumentException | IllegalStateException e) {
            logger.error("RDMA acceptor '{}': the TLS stores cannot be reloaded, the previous ones stay in use: {}",
                    name, e.getMessage());
            throw new IllegalStateException("RDMA acceptor '" + name + "': TLS reload failed: " + e.getMessage(), e);
        }
        logger.info("RDMA acceptor '{}': TLS key and trust stores reloaded", name);
    }

    /** The acceptor's TLS, null without (tests). */
    TlsEngines tls() {
        return tls;
    }

    /** The bound port (the one the system chose when port 0 was configured) while listening, else the configured. */
    @Override
    public int getActualPort() {
        RdmaServer server = listening;
        return server != null ? server.localAddress().getPort() : address.getPort();
    }

    int connectionCount() {
        return connections.size();
    }

    /** The transport counters of this acceptor while it runs (what its meters and MBean read); null when stopped. */
    RdmaTransportMetricsMXBean metrics() {
        return metrics;
    }

    /** Keeps the acceptor's connection table in step with what the broker is told. */
    private final class Tracker implements ServerConnectionLifeCycleListener {

        @Override
        public void connectionCreated(ActiveMQComponent component, Connection connection, ProtocolManager protocol) {
            listener.connectionCreated(component, connection, protocol);
        }

        @Override
        public void connectionDestroyed(Object connectionID, boolean failed) {
            if (connections.remove(connectionID) != null) {
                listener.connectionDestroyed(connectionID, failed);
            }
        }

        @Override
        public void connectionException(Object connectionID, ActiveMQException me) {
            listener.connectionException(connectionID, me);
        }

        @Override
        public void connectionReadyForWrites(Object connectionID, boolean ready) {
            listener.connectionReadyForWrites(connectionID, ready);
        }
    }
}
