package dev.artemisrdma.artemis;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.config.BridgeConfiguration;
import org.apache.activemq.artemis.core.config.ClusterConnectionConfiguration;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.config.ha.ReplicatedPolicyConfiguration;

/**
 * Refuses broker configurations in which a link the operator put on RDMA would quietly run over Netty TCP, or not
 * run at all, saying why and what to change. Run after {@link ConnectorSwitch} has switched the plugin's connectors.
 */
final class SilentTcpCheck {

    private SilentTcpCheck() {
    }

    /**
     * @param config            the broker configuration, connectors already switched
     * @param switchedByPlugin  the connectors the plugin switched now, still TCP when the cluster manager deployed
     */
    static void check(Configuration config, Set<String> switchedByPlugin) {
        Map<String, TransportConfiguration> connectors = config.getConnectorConfigurations();
        for (ClusterConnectionConfiguration cluster : config.getClusterConfigurations()) {
            String what = "cluster connection '" + cluster.getName() + "'";
            boolean rdmaRef = ConnectorSwitch.isRdma(connectors.get(cluster.getConnectorName()));
            if (rdmaRef && cluster.getCompositeMembers() != null) {
                refuse(what + " announces the RDMA connector '" + cluster.getConnectorName()
                        + "' but names its members with <cluster-connection-uri>, whose connectors are always Netty"
                        + " TCP; declare the members as <connector>s, list them in <static-connectors> and in the"
                        + " plugin's 'connectors'");
            }
            List<String> names = new ArrayList<>(orEmpty(cluster.getStaticConnectors()));
            names.add(cluster.getConnectorName());
            refuseMixed(what, names, connectors);
            if (cluster.isAllowDirectConnectionsOnly() && names.stream().anyMatch(switchedByPlugin::contains)) {
                refuse(what + " has <allow-direct-connections-only>, which copies its static connectors before a"
                        + " broker plugin runs, so it would never accept the RDMA peers; switch the connectors with"
                        + " broker properties instead (connectorConfigurations.NAME.factoryClassName="
                        + RdmaConnectorFactory.class.getName() + ") or drop allow-direct-connections-only");
            }
        }
        if (config.getHAPolicyConfiguration() instanceof ReplicatedPolicyConfiguration primary
                && primary.isCheckForActiveServer()) {
            for (ClusterConnectionConfiguration cluster : config.getClusterConfigurations()) {
                if (primary.getClusterName() != null && !primary.getClusterName().equals(cluster.getName())) {
                    continue;
                }
                List<String> names = new ArrayList<>(orEmpty(cluster.getStaticConnectors()));
                names.add(cluster.getConnectorName());
                if (names.stream().anyMatch(switchedByPlugin::contains)) {
                    refuse("the replication primary's <check-for-active-server> asks cluster connection '"
                            + cluster.getName() + "' whether its backup is active before any broker plugin runs,"
                            + " so it would ask over Netty TCP, find nothing and go active beside its backup (split"
                            + " brain after a failover); switch connectors " + names + " with broker properties"
                            + " (connectorConfigurations.NAME.factoryClassName=" + RdmaConnectorFactory.class.getName()
                            + ") instead of the plugin's 'connectors'");
                }
            }
        }
        for (ClusterConnectionConfiguration cluster : config.getClusterConfigurations()) {
            List<String> early = orEmpty(cluster.getStaticConnectors()).stream().filter(switchedByPlugin::contains)
                    .toList();
            if (!early.isEmpty()) {
                refuse("cluster connection '" + cluster.getName() + "' connects to its static connectors " + early
                        + " as soon as the cluster manager deploys, before any broker plugin runs, so its first"
                        + " attempts would go over Netty TCP; switch them with broker properties instead of the"
                        + " plugin's 'connectors': " + early.stream().map(name -> "connectorConfigurations." + name
                        + ".factoryClassName=" + RdmaConnectorFactory.class.getName()).toList());
            }
        }
        for (BridgeConfiguration bridge : config.getBridgeConfigurations()) {
            refuseMixed("bridge '" + bridge.getName() + "'", orEmpty(bridge.getStaticConnectors()), connectors);
        }
    }

    /** A link whose connectors are partly RDMA, partly TCP would reach some peers (or come back) over TCP. */
    private static void refuseMixed(String what, Collection<String> names, Map<String, TransportConfiguration> all) {
        List<String> rdma = new ArrayList<>();
        List<String> other = new ArrayList<>();
        for (String name : names) {
            TransportConfiguration connector = all.get(name);
            if (connector != null) {
                (ConnectorSwitch.isRdma(connector) ? rdma : other).add(name);
            }
        }
        if (!rdma.isEmpty() && !other.isEmpty()) {
            refuse(what + " uses RDMA connectors " + rdma + " and non-RDMA connectors " + other
                    + ", so part of it would run over TCP; add " + other + " to the plugin's 'connectors'");
        }
    }

    private static List<String> orEmpty(List<String> names) {
        return names == null ? List.of() : names;
    }

    private static void refuse(String why) {
        throw new IllegalArgumentException("RdmaAcceptorPlugin: " + why);
    }
}
