package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import jakarta.jms.Connection;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.api.core.client.TopologyMember;
import org.apache.activemq.artemis.core.client.impl.Topology;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.spi.core.protocol.RemotingConnection;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two brokers from {@code config/pairs/cluster.xml} in one JVM, on the in-memory fabric: the cluster forms over
 * RDMA (topology of two nodes, each announcing its RDMA connector, both learned by a client of the RDMA acceptor),
 * messages produced on A are consumed on B in order, and after the consumer moves to A the rest is redistributed
 * back. Once as shipped (RdmaAcceptorPlugin for the acceptor, {@code cluster.properties} for the connectors), once
 * with {@code config/pairs/cluster.properties} alone.
 */
class ClusterOverRdmaTest {

    private static final String HOST = "127.0.0.1";
    private static final String CLUSTER = "rdma-cluster";
    private static final int MESSAGES = 400;

    @TempDir
    Path dataDir;

    @BeforeAll
    static void fabric() {
        TestRuntime.install();
    }

    @Test
    void clusterFromBrokerXmlPlugin() throws Exception {
        runCluster(61771, 61772, false);
    }

    @Test
    void clusterFromBrokerProperties() throws Exception {
        runCluster(61773, 61774, true);
    }

    /**
     * The same cluster with mutual TLS on every link: each node's acceptor needs a client certificate, its cluster
     * connectors present one, and the clients connect with TLS too; a plain client is refused at either node.
     */
    @Test
    void clusterOverTls() throws Exception {
        runCluster(61777, 61778, true, true);
    }

    private void runCluster(int portA, int portB, boolean brokerProperties) throws Exception {
        runCluster(portA, portB, brokerProperties, false);
    }

    private void runCluster(int portA, int portB, boolean brokerProperties, boolean tls) throws Exception {
        String clientTls = tls ? "?sslEnabled=true&keyStorePath=" + TlsEnginesTest.store("client.p12")
                + "&keyStorePassword=secureexample&keyStoreType=PKCS12&trustStorePath="
                + TlsEnginesTest.store("trust.p12") + "&trustStorePassword=secureexample&trustStoreType=PKCS12" : "";
        try (EmbeddedBroker a = node("node-a", portA, portB, brokerProperties, tls);
             EmbeddedBroker b = node("node-b", portB, portA, brokerProperties, tls)) {
            if (tls) {
                for (int port : new int[] {portA, portB}) {
                    try (ActiveMQConnectionFactory plain = RdmaConnectionFactories.create("rdma://" + HOST + ":" + port
                            + "?reconnectAttempts=0")) {
                        org.junit.jupiter.api.Assertions.assertThrows(jakarta.jms.JMSException.class,
                                plain::createConnection, "a plain client at a TLS node");
                    }
                }
            }
            awaitTwoNodeRdmaTopology(a.server());
            awaitTwoNodeRdmaTopology(b.server());
            assertNotNull(a.server().getRemotingService().getAcceptor("rdma").getClusterConnection(),
                    "the RDMA acceptor is bound to no cluster connection");
            try (ActiveMQConnectionFactory onA = RdmaConnectionFactories.create("rdma://" + HOST + ":" + portA
                    + clientTls);
                 ActiveMQConnectionFactory onB = RdmaConnectionFactories.create("rdma://" + HOST + ":" + portB
                    + clientTls);
                 Connection toA = onA.createConnection();
                 Connection toB = onB.createConnection()) {
                toA.start();
                toB.start();
                Session sessionA = toA.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Session sessionB = toB.createSession(false, Session.AUTO_ACKNOWLEDGE);
                Queue queue = sessionA.createQueue("cluster.orders");
                MessageConsumer consumerB = sessionB.createConsumer(queue);
                awaitRemoteConsumer(a.server());
                MessageProducer producer = sessionA.createProducer(queue);
                for (int i = 0; i < MESSAGES; i++) {
                    TextMessage m = sessionA.createTextMessage("order " + i);
                    m.setIntProperty("seq", i);
                    producer.send(m);
                }
                List<Integer> received = new ArrayList<>();
                receive(consumerB, MESSAGES / 2, received);
                consumerB.close(); // the rest stays on B until a consumer on A pulls it back
                receive(sessionA.createConsumer(queue), MESSAGES / 2, received);
                assertNull(sessionA.createConsumer(queue).receiveNoWait());
                List<Integer> expected = new ArrayList<>();
                for (int i = 0; i < MESSAGES; i++) {
                    expected.add(i);
                }
                assertEquals(expected, received, "each message once, in order");
                // the topology reached a client of the RDMA acceptor
                assertEquals(2, onA.getServerLocator().getTopology().getMembers().size());
            }
            assertLinksOnRdma(a.server());
            assertLinksOnRdma(b.server());
        }
    }

    private EmbeddedBroker node(String name, int port, int peerPort, boolean brokerProperties, boolean tls)
            throws Exception {
        Configuration config = EmbeddedBroker.testable(EmbeddedBroker.read("pairs/cluster.xml", Map.of(
                "broker.name", name, "rdma.host", HOST, "rdma.port", Integer.toString(port),
                "rdma.peer.host", HOST, "rdma.peer.port", Integer.toString(peerPort))), dataDir.resolve(name));
        if (brokerProperties) { // the broker-properties route alone
            new ArrayList<>(config.getBrokerPlugins()).forEach(config::unRegisterBrokerPlugin);
        }
        if (tls) { // the acceptor needs a client certificate; the cluster's connectors present the broker's
            Map<String, Object> keys = new java.util.HashMap<>(TlsEnginesTest.acceptorParams("needClientAuth", "true"));
            keys.remove("host");
            keys.remove("port");
            for (TransportConfiguration acceptor : new ArrayList<>(config.getAcceptorConfigurations())) {
                config.getAcceptorConfigurations().remove(acceptor);
                Map<String, Object> params = new java.util.HashMap<>(acceptor.getParams());
                params.putAll(keys);
                config.addAcceptorConfiguration(new TransportConfiguration(acceptor.getFactoryClassName(), params,
                        acceptor.getName()));
            }
            Map<String, Object> connectorKeys = new java.util.HashMap<>(keys);
            connectorKeys.remove("needClientAuth");
            config.getConnectorConfigurations().replaceAll((n, c) -> {
                Map<String, Object> params = new java.util.HashMap<>(c.getParams());
                params.putAll(connectorKeys);
                return new TransportConfiguration(c.getFactoryClassName(), params, c.getName());
            });
        }
        return EmbeddedBroker.start(config, EmbeddedBroker.configDir().resolve("pairs/cluster.properties").toString());
    }

    private static void awaitTwoNodeRdmaTopology(ActiveMQServer server) throws InterruptedException {
        Topology topology = server.getClusterManager().getClusterConnection(CLUSTER).getTopology();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (topology.getMembers().size() < 2 && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        assertEquals(2, topology.getMembers().size(), "topology of " + server + ": " + topology.describe());
        for (TopologyMember member : topology.getMembers()) {
            TransportConfiguration primary = member.getPrimary();
            assertEquals(RdmaConnectorFactory.class.getName(), primary.getFactoryClassName(),
                    "announced connector " + primary);
        }
    }

    private static void awaitRemoteConsumer(ActiveMQServer server) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            var bindings = server.getPostOffice().getBindingsForAddress(
                    org.apache.activemq.artemis.api.core.SimpleString.of("cluster.orders"));
            boolean remoteWithConsumer = bindings.getBindings().stream().anyMatch(binding ->
                    binding instanceof org.apache.activemq.artemis.core.server.cluster.RemoteQueueBinding r
                            && r.consumerCount() > 0);
            if (remoteWithConsumer) {
                return;
            }
            Thread.sleep(50);
        }
        throw new AssertionError("node A never learned of the consumer on node B");
    }

    private static void receive(MessageConsumer consumer, int count, List<Integer> into) throws Exception {
        for (int i = 0; i < count; i++) {
            TextMessage m = (TextMessage) consumer.receive(20_000);
            assertNotNull(m, "message " + into.size() + " did not arrive");
            into.add(m.getIntProperty("seq"));
        }
    }

    /** Every connection the broker accepted (the peer's cluster links among them) is an RDMA one that carried frames. */
    private static void assertLinksOnRdma(ActiveMQServer server) throws InterruptedException {
        server.getRemotingService().getAcceptors().values().forEach(acceptor ->
                assertInstanceOf(RdmaAcceptor.class, acceptor, "a non-RDMA acceptor could have carried a link"));
        // a connection accepted a moment ago (the cluster opens more as the topology settles) may not have carried
        // its first packet yet: give each a few seconds before calling it idle
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        int links = 0;
        for (RemotingConnection connection : server.getRemotingService().getConnections()) {
            RdmaConnection rdma = assertInstanceOf(RdmaConnection.class, connection.getTransportConnection());
            while (rdma.channel().stats().framesReceived() == 0 && rdma.channel().isOpen()
                    && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            assertTrue(rdma.channel().stats().framesReceived() > 0 || !rdma.channel().isOpen(),
                    "idle link " + rdma);
            links++;
        }
        assertTrue(links > 0, "no peer link reached " + server);
    }
}
