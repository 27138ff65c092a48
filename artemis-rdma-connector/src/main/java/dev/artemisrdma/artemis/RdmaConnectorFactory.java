package dev.artemisrdma.artemis;

import java.util.Map;
import java.util.concurrent.Executor;
import java.util.concurrent.ScheduledExecutorService;

import dev.artemisrdma.transport.config.TransportConfig;
import org.apache.activemq.artemis.spi.core.remoting.BufferHandler;
import org.apache.activemq.artemis.spi.core.remoting.ClientConnectionLifeCycleListener;
import org.apache.activemq.artemis.spi.core.remoting.ClientProtocolManager;
import org.apache.activemq.artemis.spi.core.remoting.Connector;
import org.apache.activemq.artemis.spi.core.remoting.ConnectorFactory;

/**
 * Client side of the RDMA transport, named in a {@code TransportConfiguration}:
 * {@code new TransportConfiguration("dev.artemisrdma.artemis.RdmaConnectorFactory", Map.of("host", h, "port", p))}.
 * Parameters: see {@link RdmaParameters}; an unknown key is refused, naming it and listing the valid keys.
 */
public class RdmaConnectorFactory implements ConnectorFactory {

    public RdmaConnectorFactory() {
    }

    @Override
    public Connector createConnector(Map<String, Object> configuration, BufferHandler handler,
                                     ClientConnectionLifeCycleListener listener, Executor closeExecutor,
                                     Executor threadPool, ScheduledExecutorService scheduledThreadPool,
                                     ClientProtocolManager protocolManager) {
        TransportConfig transportConfig = RdmaParameters.parse("RDMA connector", configuration,
                RdmaParameters.CONNECTOR_KEYS);
        return new RdmaConnector(configuration, transportConfig, handler, listener, closeExecutor, scheduledThreadPool,
                protocolManager);
    }

    /**
     * False: the client keeps Artemis pings and connection TTL, as over TCP. The transport reports a disconnected
     * or failed peer at once, but a peer that hangs without failing is only found by pings.
     */
    @Override
    public boolean isReliable() {
        return false;
    }

    @Override
    public Map<String, Object> getDefaults() {
        return Map.of(RdmaParameters.HOST, RdmaParameters.DEFAULT_HOST, RdmaParameters.PORT,
                RdmaParameters.DEFAULT_PORT);
    }
}
