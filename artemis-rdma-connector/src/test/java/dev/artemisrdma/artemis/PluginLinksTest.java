package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Proxy;
import java.net.URI;
import java.util.List;
import java.util.Map;

import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.config.BridgeConfiguration;
import org.apache.activemq.artemis.core.config.ClusterConnectionConfiguration;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.config.ConfigurationUtils;
import org.apache.activemq.artemis.core.config.impl.ConfigurationImpl;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.ServiceRegistry;
import org.apache.activemq.artemis.core.server.impl.ServiceRegistryImpl;
import org.apache.activemq.artemis.utils.uri.URISupport;
import org.junit.jupiter.api.Test;

/**
 * RdmaAcceptorPlugin's {@code connectors}, the binding of its acceptors to the cluster connection, and the refusal
 * of configurations in which a link would silently stay on TCP; the configuration objects are built as the broker.xml
 * parser builds them ({@code tcp://} URLs).
 */
class PluginLinksTest {

    private static final String RDMA_CONNECTOR = RdmaConnectorFactory.class.getName();

    private final Configuration config = new ConfigurationImpl();
    private final ServiceRegistry registry = new ServiceRegistryImpl();

    private void connector(String name, String url) throws Exception {
        config.getConnectorConfigurations().put(name, ConfigurationUtils.parseConnectorURI(name, url).get(0));
    }

    private TransportConfiguration acceptor(String name, String url) throws Exception {
        TransportConfiguration acceptor = ConfigurationUtils.parseAcceptorURI(name, url).get(0);
        config.addAcceptorConfiguration(acceptor);
        return acceptor;
    }

    private ClusterConnectionConfiguration cluster(String name, String connectorRef, String... statics) {
        ClusterConnectionConfiguration cluster = new ClusterConnectionConfiguration().setName(name)
                .setConnectorName(connectorRef).setStaticConnectors(List.of(statics));
        config.getClusterConfigurations().add(cluster);
        return cluster;
    }

    /** Connectors "self" (10.0.0.1) and "peer" (10.0.0.2) on {@code port}, and cluster connection NAME over them. */
    private ClusterConnectionConfiguration selfAndPeer(String name, int port) throws Exception {
        connector("self", "tcp://10.0.0.1:" + port);
        connector("peer", "tcp://10.0.0.2:" + port);
        return cluster(name, "self", "peer");
    }

    private void bridge(String name, String... statics) {
        config.getBridgeConfigurations().add(new BridgeConfiguration().setName(name).setQueueName("q")
                .setStaticConnectors(List.of(statics)));
    }

    private void register(String acceptors, String connectors) {
        RdmaAcceptorPlugin plugin = new RdmaAcceptorPlugin();
        plugin.init(acceptors == null ? Map.of(RdmaAcceptorPlugin.CONNECTORS, connectors)
                : Map.of(RdmaAcceptorPlugin.ACCEPTORS, acceptors, RdmaAcceptorPlugin.CONNECTORS, connectors));
        plugin.registered(server());
    }

    private ActiveMQServer server() {
        return (ActiveMQServer) Proxy.newProxyInstance(ActiveMQServer.class.getClassLoader(),
                new Class<?>[] {ActiveMQServer.class}, (proxy, method, args) -> switch (method.getName()) {
                    case "getConfiguration" -> config;
                    case "getServiceRegistry" -> registry;
                    default -> throw new UnsupportedOperationException(method.getName());
                });
    }

    private String refusal(String acceptors, String connectors) {
        return assertThrows(IllegalArgumentException.class, () -> register(acceptors, connectors)).getMessage();
    }

    @Test
    void connectorsAreSwitchedInPlaceKeepingHostPortAndQueryKeys() throws Exception {
        connector("self", "tcp://10.0.0.1:61700?receiveSlots=128");
        connector("peer", "tcp://10.0.0.2:61700");
        TransportConfiguration self = config.getConnectorConfigurations().get("self");
        acceptor("rdma", "tcp://10.0.0.1:61700?protocols=CORE");
        cluster("c", "self"); // the announced connector: compared, never connected to by this broker
        bridge("br", "peer");

        register("rdma", "self,peer");

        assertSame(self, config.getConnectorConfigurations().get("self"), "the entry was replaced, not switched");
        assertEquals(RDMA_CONNECTOR, self.getFactoryClassName());
        assertEquals(RDMA_CONNECTOR, config.getConnectorConfigurations().get("peer").getFactoryClassName());
        Map<String, Object> params = self.getCombinedParams();
        assertEquals("10.0.0.1", params.get("host"));
        assertEquals("61700", params.get("port").toString());
        assertEquals("128", params.get("receiveSlots"));
        assertInstanceOf(RdmaAcceptorFactory.class, registry.getAcceptorFactory("rdma", null));
        TransportConfiguration acceptor = config.getAcceptorConfigurations().iterator().next();
        assertEquals("c", acceptor.getParams().get(RdmaParameters.CLUSTER_CONNECTION),
                "the RDMA acceptor was not bound to the broker's only cluster connection");
    }

    @Test
    void registeringAgainAfterFailbackChangesNothing() throws Exception {
        connector("self", "tcp://10.0.0.1:61700");
        connector("peer", "tcp://10.0.0.2:61700");
        cluster("c", "self");
        bridge("br", "peer");
        acceptor("rdma", "tcp://10.0.0.1:61700");
        register("rdma", "self,peer");
        String before = config.getConnectorConfigurations().toString() + config.getAcceptorConfigurations();
        register("rdma", "self,peer");
        assertEquals(before, config.getConnectorConfigurations().toString() + config.getAcceptorConfigurations());
    }

    @Test
    void maskPasswordKeysAddedByTheParserAreAccepted() throws Exception {
        connector("peer", "tcp://10.0.0.2:61700");
        config.getConnectorConfigurations().get("peer").getParams().put(RdmaParameters.MASK_PASSWORD, true);
        config.getConnectorConfigurations().get("peer").getParams().put(RdmaParameters.PASSWORD_CODEC, "my.Codec");
        register(null, "peer");
        RdmaParameters.parse("acceptor", Map.of("host", "h", RdmaParameters.MASK_PASSWORD, true,
                RdmaParameters.PASSWORD_CODEC, "my.Codec", RdmaParameters.CLUSTER_CONNECTION, "c"),
                RdmaParameters.ACCEPTOR_KEYS);
    }

    @Test
    void missingConnectorIsNamed() throws Exception {
        connector("peer", "tcp://10.0.0.2:61700");
        String why = refusal(null, "peer,nope");
        assertTrue(why.contains("no connector named 'nope'") && why.contains("[peer]"), why);
    }

    @Test
    void connectorWithANettyOnlyKeyIsRefusedAtStartUp() throws Exception {
        connector("peer", "tcp://10.0.0.2:61700?tcpNoDelay=true");
        String why = refusal(null, "peer");
        assertTrue(why.contains("'tcpNoDelay'") && why.contains("connector 'peer'"), why);
    }

    /** Issue 38: Netty's TLS keys go over RDMA too; their values are checked when the connector is switched. */
    @Test
    void connectorWithABadTlsValueIsRefusedAtStartUp() throws Exception {
        connector("peer", "tcp://10.0.0.2:61700?sslEnabled=true&verifyHost=yes");
        String why = refusal(null, "peer");
        assertTrue(why.contains("connector 'peer'") && why.contains("verifyHost: expected true or false, got 'yes'"),
                why);
    }

    @Test
    void inVmConnectorIsRefused() throws Exception {
        connector("local", "vm://0");
        assertTrue(refusal(null, "local").contains("only tcp:// connectors"));
    }

    @Test
    void clusterMixingRdmaAndTcpConnectorsIsRefused() throws Exception {
        selfAndPeer("c", 61700);
        String why = refusal(null, "self");
        assertTrue(why.contains("cluster connection 'c'") && why.contains("[peer]"), why);
    }

    @Test
    void bridgeMixingRdmaAndTcpConnectorsIsRefused() throws Exception {
        connector("b1", "tcp://10.0.0.2:61700");
        connector("b2", "tcp://10.0.0.3:61700");
        config.getBridgeConfigurations().add(new BridgeConfiguration().setName("br").setQueueName("q")
                .setStaticConnectors(List.of("b1", "b2")));
        String why = refusal(null, "b1");
        assertTrue(why.contains("bridge 'br'") && why.contains("[b2]"), why);
    }

    @Test
    void clusterConnectionUriIsRefusedWhenItsConnectorIsRdma() throws Exception {
        connector("self", "tcp://10.0.0.1:61700");
        cluster("c", "self").setCompositeMembers(URISupport.parseComposite(new URI("static:(tcp://10.0.0.2:61700)")));
        assertTrue(refusal(null, "self").contains("<cluster-connection-uri>"));
    }

    @Test
    void allowDirectConnectionsOnlyIsRefusedForPluginSwitchedConnectors() throws Exception {
        selfAndPeer("c", 61700).setAllowDirectConnectionsOnly(true);
        String why = refusal(null, "self,peer");
        assertTrue(why.contains("allow-direct-connections-only") && why.contains("connectorConfigurations."), why);
    }

    @Test
    void clusterStaticConnectorsSwitchedByThePluginAreRefused() throws Exception {
        // the cluster controller connects to them during ClusterManager.deploy(), before plugins are registered
        selfAndPeer("c", 61700);
        String why = refusal(null, "self,peer");
        assertTrue(why.contains("cluster connection 'c'") && why.contains("[peer]") && why.contains("Netty TCP")
                && why.contains("connectorConfigurations.peer.factoryClassName=" + RDMA_CONNECTOR), why);
    }

    @Test
    void clusterStaticConnectorsAlreadySwitchedByBrokerPropertiesAreAccepted() throws Exception {
        selfAndPeer("c", 61700);
        // as connectorConfigurations.NAME.factoryClassName would have before the cluster manager deployed
        config.getConnectorConfigurations().values().forEach(c -> c.setFactoryClassName(RDMA_CONNECTOR));
        acceptor("rdma", "tcp://10.0.0.1:61700");
        register("rdma", "self,peer"); // listed again: validated, nothing to switch
        assertEquals("c", config.getAcceptorConfigurations().iterator().next().getParams()
                .get(RdmaParameters.CLUSTER_CONNECTION));
    }

    @Test
    void checkForActiveServerIsRefusedForPluginSwitchedConnectors() throws Exception {
        selfAndPeer("ha", 61700);
        config.setHAPolicyConfiguration(new org.apache.activemq.artemis.core.config.ha.ReplicatedPolicyConfiguration()
                .setCheckForActiveServer(true));
        String why = refusal(null, "self,peer");
        assertTrue(why.contains("check-for-active-server") && why.contains("connectorConfigurations."), why);
    }

    @Test
    void acceptorOfAClusterAnnouncingTcpIsRefused() throws Exception {
        selfAndPeer("c", 61616);
        acceptor("rdma", "tcp://10.0.0.1:61700");
        String why = refusal("rdma", "");
        assertTrue(why.contains("non-RDMA connector 'self'"), why);
    }

    @Test
    void acceptorNamingItsClusterConnectionIsLeftAsNamed() throws Exception {
        connector("self", "tcp://10.0.0.1:61616");
        acceptor("rdma", "tcp://10.0.0.1:61700?clusterConnection=c");
        cluster("c", "self");
        register("rdma", "");
        assertEquals("c", config.getAcceptorConfigurations().iterator().next().getParams().get("clusterConnection"));
    }

    @Test
    void acceptorMustChooseAmongSeveralClusterConnections() throws Exception {
        connector("self", "tcp://10.0.0.1:61700");
        acceptor("rdma", "tcp://10.0.0.1:61700");
        cluster("c1", "self");
        cluster("c2", "self");
        assertTrue(refusal("rdma", "self").contains("clusterConnection=NAME"));
    }

    @Test
    void acceptorNamingAnUnknownClusterConnectionIsRefused() throws Exception {
        connector("self", "tcp://10.0.0.1:61700");
        acceptor("rdma", "tcp://10.0.0.1:61700?clusterConnection=nope");
        cluster("c", "self");
        String why = refusal("rdma", "self");
        assertTrue(why.contains("clusterConnection=nope") && why.contains("[c]"), why);
    }

    @Test
    void pluginWithoutAnyNameIsRefused() {
        assertTrue(refusal(null, "").contains("name nothing"));
        assertNull(registry.getAcceptorFactory("rdma", null));
    }

    @Test
    void connectorsAreEquivalentWhenTheirHostsResolveToTheSameAddress() {
        assertTrue(RdmaParameters.sameEndpoint(Map.of("host", "localhost", "port", 61700),
                Map.of("host", "127.0.0.1", "port", "61700")), "a name and its address");
        assertTrue(!RdmaParameters.sameEndpoint(Map.of("host", "10.77.0.1", "port", 61700),
                Map.of("host", "10.77.0.2", "port", 61700)), "two addresses");
        assertTrue(!RdmaParameters.sameEndpoint(Map.of("host", "localhost", "port", 61700),
                Map.of("host", "localhost", "port", 61701)), "two ports");
        assertTrue(RdmaParameters.sameEndpoint(Map.of("host", "no-such-host.invalid", "port", 1),
                Map.of("host", "no-such-host.invalid", "port", 1)), "an unresolvable host equals its own spelling");
        assertTrue(!RdmaParameters.sameEndpoint(Map.of("host", "no-such-host.invalid", "port", 1),
                Map.of("host", "other-host.invalid", "port", 1)));
    }

    @Test
    void clusterXmlWithItsConnectorsSwitchedByThePluginIsRefused() throws Exception {
        Configuration parsed = EmbeddedBroker.read("pairs/cluster.xml", Map.of());
        RdmaAcceptorPlugin plugin = (RdmaAcceptorPlugin) parsed.getBrokerPlugins().get(0);
        plugin.init(Map.of(RdmaAcceptorPlugin.ACCEPTORS, "rdma", RdmaAcceptorPlugin.CONNECTORS, "self,peer"));
        ActiveMQServer server = (ActiveMQServer) Proxy.newProxyInstance(ActiveMQServer.class.getClassLoader(),
                new Class<?>[] {ActiveMQServer.class}, (proxy, method, args) -> switch (method.getName()) {
                    case "getConfiguration" -> parsed;
                    case "getServiceRegistry" -> registry;
                    default -> throw new UnsupportedOperationException(method.getName());
                });
        String why = assertThrows(IllegalArgumentException.class, () -> plugin.registered(server)).getMessage();
        assertTrue(why.contains("cluster connection 'rdma-cluster'") && why.contains("[peer]"), why);
    }

    /** Every ready configuration of config/pairs parses (schema-checked) and puts all its links on RDMA. */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {"cluster.xml", "primary.xml", "backup.xml",
            "bridge-source.xml", "bridge-target.xml"})
    void readyConfigurationsPutEveryLinkOnRdma(String file) throws Exception {
        Configuration parsed = EmbeddedBroker.read("pairs/" + file, Map.of());
        String properties = switch (file) { // as the broker applies them, before the cluster manager and plugins
            case "primary.xml", "backup.xml" -> "replication.properties";
            case "cluster.xml" -> "cluster.properties";
            default -> null;
        };
        if (properties != null) {
            ((org.apache.activemq.artemis.core.config.impl.ConfigurationImpl) parsed).parseProperties(
                    EmbeddedBroker.configDir().resolve("pairs/" + properties).toString());
        }
        ActiveMQServer server = (ActiveMQServer) Proxy.newProxyInstance(ActiveMQServer.class.getClassLoader(),
                new Class<?>[] {ActiveMQServer.class}, (proxy, method, args) -> switch (method.getName()) {
                    case "getConfiguration" -> parsed;
                    case "getServiceRegistry" -> registry;
                    default -> throw new UnsupportedOperationException(method.getName());
                });
        assertEquals(1, parsed.getBrokerPlugins().size(), file);
        ((RdmaAcceptorPlugin) parsed.getBrokerPlugins().get(0)).registered(server);
        parsed.getConnectorConfigurations().forEach((name, connector) ->
                assertEquals(RDMA_CONNECTOR, connector.getFactoryClassName(), file + ": connector " + name));
        assertInstanceOf(RdmaAcceptorFactory.class, registry.getAcceptorFactory("rdma", null), file);
        if (!parsed.getClusterConfigurations().isEmpty()) {
            assertEquals(parsed.getClusterConfigurations().get(0).getName(), parsed.getAcceptorConfigurations()
                    .iterator().next().getParams().get(RdmaParameters.CLUSTER_CONNECTION), file);
        }
    }
}
