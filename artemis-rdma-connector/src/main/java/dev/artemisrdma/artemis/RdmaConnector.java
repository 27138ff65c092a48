package dev.artemisrdma.artemis;

import java.lang.invoke.MethodHandles;
import java.net.InetSocketAddress;
import java.util.Map;
import java.util.concurrent.Executor;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.ChannelHandler;
import dev.artemisrdma.transport.AddressingException;
import dev.artemisrdma.transport.FabricException;
import dev.artemisrdma.transport.RdmaChannel;
import org.apache.activemq.artemis.spi.core.remoting.AbstractConnector;
import org.apache.activemq.artemis.spi.core.remoting.BufferHandler;
import org.apache.activemq.artemis.spi.core.remoting.ClientConnectionLifeCycleListener;
import org.apache.activemq.artemis.spi.core.remoting.ClientProtocolManager;
import org.apache.activemq.artemis.spi.core.remoting.Connection;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Connects a client to an RDMA acceptor. Holds a lease on the shared runtime from start to close. */
final class RdmaConnector extends AbstractConnector {

    private static final Logger logger = LoggerFactory.getLogger(MethodHandles.lookup().lookupClass());

    private final BufferHandler handler;
    private final ClientConnectionLifeCycleListener listener;
    private final Executor closeExecutor;
    private final ScheduledExecutorService scheduler;
    private final ClientProtocolManager protocolManager;
    private final InetSocketAddress target;
    private final int batchDelay;
    private RdmaRuntime.Lease lease;
    private ClientMetrics.Group metrics;
    private ScheduledFuture<?> batchFlusher;
    private volatile RdmaConnection lastConnection;
    private volatile String lastAddressingError;

    RdmaConnector(Map<String, Object> configuration, BufferHandler handler, ClientConnectionLifeCycleListener listener,
                  Executor closeExecutor, ScheduledExecutorService scheduler, ClientProtocolManager protocolManager) {
        super(configuration);
        this.handler = handler;
        this.listener = listener;
        this.closeExecutor = closeExecutor;
        this.scheduler = scheduler;
        this.protocolManager = protocolManager;
        this.target = new InetSocketAddress(RdmaParameters.host(configuration), RdmaParameters.port(configuration));
        this.batchDelay = RdmaParameters.batchDelay(configuration);
    }

    @Override
    public synchronized void start() {
        if (lease != null) {
            return;
        }
        try {
            lease = RdmaRuntime.acquire(RdmaParameters.transportSettings(configuration));
            metrics = ClientMetrics.join(RdmaParameters.metricsName(configuration), lease.transport());
        } catch (FabricException | RuntimeException e) {
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
        synchronized (this) {
            current = lease;
            counting = metrics == null ? null : metrics.metrics();
        }
        if (current == null) {
            return null;
        }
        RdmaConnection connection = new RdmaConnection(configuration, handler, listener, closeExecutor, batchDelay,
                false);
        RdmaChannel channel;
        try {
            ChannelHandler tracked = counting == null ? connection : counting.track(connection);
            channel = current.transport().connect(target, tracked);
        } catch (AddressingException e) {
            logAddressingError(e);
            return null;
        } catch (FabricException | RuntimeException e) {
            logger.debug("RDMA connector: cannot connect to {}: {}", target, e.getMessage());
            return null;
        }
        connection.bind(channel);
        if (counting != null) {
            counting.add(channel);
        }
        if (!channel.isOpen()) {
            logger.debug("RDMA connector: connection {} to {} closed while connecting", channel.id(), target);
            return null;
        }
        listener.connectionCreated(null, connection, protocolManager);
        lastConnection = connection;
        scheduleBatchFlusher();
        logger.debug("RDMA connection {} to {} established", channel.id(), target);
        return connection;
    }

    /**
     * A configuration the fabric cannot serve (unknown device, no route) is the operator's to fix: said once at warn
     * (Artemis only reports "cannot connect"), then at debug while the client keeps retrying with the same result.
     */
    private void logAddressingError(AddressingException e) {
        String message = e.getMessage();
        if (!message.equals(lastAddressingError)) {
            lastAddressingError = message;
            logger.warn("RDMA connector: cannot connect to {}: {}", target, message);
        } else {
            logger.debug("RDMA connector: cannot connect to {}: {}", target, message);
        }
    }

    private synchronized void scheduleBatchFlusher() {
        if (batchDelay > 0 && batchFlusher == null) {
            batchFlusher = scheduler.scheduleWithFixedDelay(() -> {
                RdmaConnection connection = lastConnection;
                if (connection != null) {
                    connection.checkFlushBatchBuffer();
                }
            }, batchDelay, batchDelay, TimeUnit.MILLISECONDS);
        }
    }

    @Override
    public synchronized void close() {
        if (batchFlusher != null) {
            batchFlusher.cancel(false);
            batchFlusher = null;
        }
        if (lease != null) {
            lease.close();
            lease = null;
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
