package dev.artemisrdma.artemis;

import java.lang.invoke.MethodHandles;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Switches named broker.xml {@code <connector>}s to {@link RdmaConnectorFactory}, in place.
 *
 * <p>In place, because a broker plugin runs after the cluster manager has deployed: cluster connections, bridges,
 * the backup's link to its primary and the broadcast groups already hold these very {@link TransportConfiguration}
 * objects, and read the factory class name again on every connection attempt. A new map entry would reach none of
 * them. Host, port and the URL's query keys (the RDMA tuning keys sit in the extra parameters, which clients
 * receive too) stay as they are. Switching an already switched connector only validates it again: the plugin runs
 * again on every activation (after failback, for instance).
 */
final class ConnectorSwitch {

    private static final Logger logger = LoggerFactory.getLogger(MethodHandles.lookup().lookupClass());
    private static final String RDMA = RdmaConnectorFactory.class.getName();

    private ConnectorSwitch() {
    }

    /** True when {@code connector} is (now) an RDMA connector. */
    static boolean isRdma(TransportConfiguration connector) {
        return connector != null && RDMA.equals(connector.getFactoryClassName());
    }

    /**
     * Switches each named connector; a missing one, a non-TCP one or one with a key RDMA does not know is refused.
     *
     * @return the names switched now, that is those that were still TCP when the plugin ran (components deployed
     *         before the plugin may already have used them); empty when the plugin runs again after a failback
     */
    static Set<String> apply(Map<String, TransportConfiguration> connectors, List<String> names) {
        Set<String> switched = new TreeSet<>();
        for (String name : names) {
            TransportConfiguration connector = connectors.get(name);
            if (connector == null) {
                throw new IllegalArgumentException("RdmaAcceptorPlugin: no connector named '" + name
                        + "' in the broker configuration; connectors are " + new TreeSet<>(connectors.keySet()));
            }
            String factory = connector.getFactoryClassName();
            if (!RDMA.equals(factory) && (factory == null || !factory.contains("Netty"))) {
                throw new IllegalArgumentException("RdmaAcceptorPlugin: connector '" + name + "' uses " + factory
                        + "; only tcp:// connectors can be switched to RDMA");
            }
            // validated now, so a bad key stops the broker; each connector made from it later parses its own map
            String what = "RdmaAcceptorPlugin: connector '" + name + "' as an RDMA connector";
            RdmaParameters.parse(what, connector.getCombinedParams(), RdmaParameters.CONNECTOR_KEYS);
            try {
                TlsEngines.settings(TlsEngines.Side.CONNECTOR, connector.getCombinedParams());
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(what + ": " + e.getMessage(), e);
            }
            if (!RDMA.equals(factory)) {
                connector.setFactoryClassName(RDMA);
                switched.add(name);
                logger.info("RdmaAcceptorPlugin: connector '{}' ({}:{}) now connects over RDMA", name,
                        RdmaParameters.host(connector.getParams()), RdmaParameters.port(connector.getParams()));
            }
        }
        return switched;
    }
}
