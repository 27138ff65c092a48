package dev.artemisrdma.artemis;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.Executor;
import java.util.concurrent.ScheduledExecutorService;

import dev.artemisrdma.transport.config.TransportConfig;
import org.apache.activemq.artemis.api.core.client.ActiveMQClient;
import org.apache.activemq.artemis.core.server.cluster.ClusterConnection;
import org.apache.activemq.artemis.core.server.metrics.MetricsManager;
import org.apache.activemq.artemis.spi.core.protocol.ProtocolManager;
import org.apache.activemq.artemis.spi.core.remoting.Acceptor;
import org.apache.activemq.artemis.spi.core.remoting.AcceptorFactory;
import org.apache.activemq.artemis.spi.core.remoting.BufferHandler;
import org.apache.activemq.artemis.spi.core.remoting.ServerConnectionLifeCycleListener;

/**
 * Broker side of the RDMA transport. Named by broker properties
 * ({@code acceptorConfigurations.NAME.factoryClassName=dev.artemisrdma.artemis.RdmaAcceptorFactory}) or put in place
 * of a broker.xml acceptor by {@link RdmaAcceptorPlugin}. Parameters: see {@link RdmaParameters}; an unknown key is
 * refused, naming it and listing the valid keys. Carries CORE only: a {@code protocols} setting without CORE is
 * refused.
 */
public class RdmaAcceptorFactory implements AcceptorFactory {

    private final Map<String, Object> extraParams;

    public RdmaAcceptorFactory() {
        this(Map.of());
    }

    /** With parameters the broker does not pass itself (the query keys of a broker.xml {@code tcp://} URL). */
    RdmaAcceptorFactory(Map<String, Object> extraParams) {
        this.extraParams = Map.copyOf(extraParams);
    }

    @Override
    public Acceptor createAcceptor(String name, ClusterConnection clusterConnection, Map<String, Object> configuration,
                                   BufferHandler handler, ServerConnectionLifeCycleListener listener,
                                   Executor threadPool, ScheduledExecutorService scheduledThreadPool,
                                   Map<String, ProtocolManager> protocolMap, String threadFactoryGroupName,
                                   MetricsManager metricsManager) {
        Map<String, Object> params = new HashMap<>(configuration);
        params.putAll(extraParams);
        String what = "RDMA acceptor '" + name + "'";
        TransportConfig transportConfig = RdmaParameters.parse(what, params, RdmaParameters.ACCEPTOR_KEYS);
        try {
            RdmaParameters.connectionsAllowed(params);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(what + ": " + e.getMessage(), e);
        }
        ProtocolManager core = protocolMap.get(ActiveMQClient.DEFAULT_CORE_PROTOCOL);
        if (core == null || !listsCore(params.get(RdmaParameters.PROTOCOLS))) {
            throw new IllegalArgumentException(what + " carries the CORE protocol only, but its protocols setting '"
                    + params.get(RdmaParameters.PROTOCOLS) + "' leaves CORE out; set protocols=CORE or remove it");
        }
        return new RdmaAcceptor(name, clusterConnection, params, transportConfig, handler, listener, threadPool,
                scheduledThreadPool, protocolMap, core, metricsManager);
    }

    /** True when no protocols are set or they include CORE (the broker falls back to all when none is known). */
    private static boolean listsCore(Object protocols) {
        if (protocols == null) {
            return true;
        }
        for (String protocol : protocols.toString().split(",")) {
            if (protocol.trim().equalsIgnoreCase(ActiveMQClient.DEFAULT_CORE_PROTOCOL)) {
                return true;
            }
        }
        return false;
    }
}
