package dev.artemisrdma.artemis;

import java.lang.invoke.MethodHandles;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;

import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.config.ClusterConnectionConfiguration;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.plugin.ActiveMQServerPlugin;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Puts named broker.xml acceptors and connectors on RDMA, so RDMA is enabled by editing broker.xml alone (broker.xml
 * cannot name a factory class: its URLs only know {@code tcp://} and {@code vm://}):
 *
 * <pre>{@code
 * <acceptors>
 *    <acceptor name="rdma">tcp://10.77.0.1:61700?protocols=CORE;receiveSlots=256</acceptor>
 * </acceptors>
 * <connectors>
 *    <connector name="self">tcp://10.77.0.1:61700</connector>
 *    <connector name="peer">tcp://10.77.0.2:61700</connector>
 * </connectors>
 * <broker-plugins>
 *    <broker-plugin class-name="dev.artemisrdma.artemis.RdmaAcceptorPlugin">
 *       <property key="acceptors" value="rdma"/>
 *       <property key="connectors" value="self,peer"/>
 *    </broker-plugin>
 * </broker-plugins>
 * }</pre>
 *
 * <p><b>Acceptors</b>: when the plugin is registered, before the broker creates its acceptors, it registers an
 * {@link RdmaAcceptorFactory} under each named acceptor; the broker looks factories up by acceptor name first. The
 * URL's host, port and query keys (including the RDMA tuning keys, which the broker's TCP parser would otherwise
 * drop) become the RDMA acceptor's parameters. Artemis binds an acceptor to a cluster connection only when their
 * factories are both Netty or both in-VM; so when the broker has exactly one cluster connection and the URL names
 * none, the plugin sets {@code clusterConnection} on the acceptors it switches, and their clients receive the
 * cluster's topology (backups to fail over to, other nodes).
 *
 * <p><b>Connectors</b>: see {@link ConnectorSwitch} (switched in place, idempotent). A cluster connection's static
 * connectors cannot be among them: Artemis's cluster controller connects to them while the cluster manager deploys,
 * before plugins are registered, so they would first be tried over Netty TCP; they are switched with broker properties
 * ({@code connectorConfigurations.NAME.factoryClassName}), which apply earlier, and the plugin refuses them.
 *
 * <p>A name that matches nothing, and any combination in which a link would silently stay on TCP
 * ({@link SilentTcpCheck}), stops the broker with an error saying why.
 *
 * <p>Threads: the broker's starting thread makes it, calls {@link #init} and then {@link #registered}, once each,
 * before the acceptors exist; no other thread uses it, so it has no lock. The name lists are immutable.
 */
public class RdmaAcceptorPlugin implements ActiveMQServerPlugin {

    /** Plugin property: comma-separated names of the acceptors to switch to RDMA. */
    public static final String ACCEPTORS = "acceptors";
    /** Plugin property: comma-separated names of the connectors to switch to RDMA. */
    public static final String CONNECTORS = "connectors";

    private static final Logger logger = LoggerFactory.getLogger(MethodHandles.lookup().lookupClass());

    private List<String> acceptors = List.of();
    private List<String> connectors = List.of();

    public RdmaAcceptorPlugin() {
    }

    @Override
    public void init(Map<String, String> properties) {
        for (String key : properties.keySet()) {
            if (!ACCEPTORS.equals(key) && !CONNECTORS.equals(key)) {
                throw new IllegalArgumentException("RdmaAcceptorPlugin: unknown property '" + key
                        + "'; valid properties are [" + ACCEPTORS + ", " + CONNECTORS + "]");
            }
        }
        acceptors = names(properties.get(ACCEPTORS));
        connectors = names(properties.get(CONNECTORS));
    }

    private static List<String> names(String list) {
        return list == null ? List.of()
                : Arrays.stream(list.split(",")).map(String::trim).filter(s -> !s.isEmpty()).toList();
    }

    @Override
    public void registered(ActiveMQServer server) {
        if (acceptors.isEmpty() && connectors.isEmpty()) {
            throw new IllegalArgumentException("RdmaAcceptorPlugin: properties '" + ACCEPTORS + "' and '" + CONNECTORS
                    + "' name nothing; set them to the broker.xml acceptor and connector name(s) to put on RDMA");
        }
        Configuration configuration = server.getConfiguration();
        Set<String> switchedNow = ConnectorSwitch.apply(configuration.getConnectorConfigurations(), connectors);
        SilentTcpCheck.check(configuration, switchedNow);
        Map<String, TransportConfiguration> configured = configuration.getAcceptorConfigurations()
                .stream().collect(Collectors.toMap(TransportConfiguration::getName, tc -> tc, (a, b) -> b));
        for (String name : acceptors) {
            TransportConfiguration config = configured.get(name);
            if (config == null) {
                throw new IllegalArgumentException("RdmaAcceptorPlugin: no acceptor named '" + name
                        + "' in the broker configuration; acceptors are " + new TreeSet<>(configured.keySet()));
            }
            bindClusterConnection(configuration, config);
            Map<String, Object> extra = config.getExtraParams() == null ? Map.of() : config.getExtraParams();
            server.getServiceRegistry().addAcceptorFactory(name, new RdmaAcceptorFactory(extra));
            logger.info("RdmaAcceptorPlugin: acceptor '{}' will be served over RDMA{}", name,
                    config.getParams().containsKey(RdmaParameters.CLUSTER_CONNECTION) ? " for cluster connection '"
                            + config.getParams().get(RdmaParameters.CLUSTER_CONNECTION) + "'" : "");
        }
    }

    /**
     * Names the acceptor's cluster connection (read by the broker from the acceptor's parameters) when the broker
     * has exactly one and the URL names none; refuses a name that matches none, an unnamed choice among several,
     * and a cluster connection whose announced connector is not RDMA (its RDMA clients would learn TCP peers).
     */
    private static void bindClusterConnection(Configuration configuration, TransportConfiguration acceptor) {
        List<ClusterConnectionConfiguration> clusters = configuration.getClusterConfigurations();
        String what = "RdmaAcceptorPlugin: acceptor '" + acceptor.getName() + "'";
        Object named = acceptor.getParams().get(RdmaParameters.CLUSTER_CONNECTION);
        List<String> names = clusters.stream().map(ClusterConnectionConfiguration::getName).toList();
        if (named != null) {
            if (!names.contains(named.toString())) {
                throw new IllegalArgumentException(what + " names clusterConnection=" + named
                        + ", but the broker has no such cluster connection; cluster connections are " + names);
            }
            return;
        }
        if (clusters.isEmpty()) {
            return;
        }
        if (clusters.size() > 1) {
            throw new IllegalArgumentException(what + " must name its cluster connection (one of " + names
                    + "): add clusterConnection=NAME to its URL");
        }
        ClusterConnectionConfiguration cluster = clusters.get(0);
        if (!ConnectorSwitch.isRdma(configuration.getConnectorConfigurations().get(cluster.getConnectorName()))) {
            throw new IllegalArgumentException(what + " would hand its RDMA clients the topology of cluster connection '"
                    + cluster.getName() + "', which announces the non-RDMA connector '" + cluster.getConnectorName()
                    + "'; add '" + cluster.getConnectorName() + "' to the plugin's '" + CONNECTORS
                    + "', or name a cluster connection with clusterConnection=NAME in the acceptor URL");
        }
        try {
            acceptor.getParams().put(RdmaParameters.CLUSTER_CONNECTION, cluster.getName());
        } catch (UnsupportedOperationException e) {
            throw new IllegalArgumentException(what + " has unmodifiable parameters; set "
                    + RdmaParameters.CLUSTER_CONNECTION + "=" + cluster.getName() + " in them yourself", e);
        }
    }

    List<String> acceptors() {
        return acceptors;
    }

    List<String> connectors() {
        return connectors;
    }
}
