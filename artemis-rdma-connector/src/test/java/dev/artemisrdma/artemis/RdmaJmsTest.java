package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Properties;

import javax.naming.InitialContext;

import jakarta.jms.ConnectionFactory;
import jakarta.jms.Queue;
import org.apache.activemq.artemis.api.core.QueueConfiguration;
import org.apache.activemq.artemis.api.core.RoutingType;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.api.core.client.ActiveMQClient;
import org.apache.activemq.artemis.api.core.client.ClientConsumer;
import org.apache.activemq.artemis.api.core.client.ClientMessage;
import org.apache.activemq.artemis.api.core.client.ClientProducer;
import org.apache.activemq.artemis.api.core.client.ClientSession;
import org.apache.activemq.artemis.api.core.client.ClientSessionFactory;
import org.apache.activemq.artemis.api.core.client.ServerLocator;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;

/** A broker started from config/broker.xml (RdmaAcceptorPlugin), with clients over every documented entry point. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RdmaJmsTest {

    private static final String HOST = "127.0.0.1";
    private static final int PORT = 61711;

    @TempDir
    static Path dataDir;
    private EmbeddedBroker broker;

    @BeforeAll
    void startBroker() throws Exception {
        TestRuntime.install();
        broker = EmbeddedBroker.fromBrokerXml(dataDir, HOST, PORT);
    }

    @AfterAll
    void stopBroker() throws Exception {
        broker.close();
    }

    private static ActiveMQConnectionFactory transportConfigurationFactory() {
        TransportConfiguration tc = new TransportConfiguration(RdmaConnectorFactory.class.getName(),
                Map.of("host", HOST, "port", PORT));
        return new ActiveMQConnectionFactory(false, tc);
    }

    private static String url(String query) {
        return "rdma://" + HOST + ":" + PORT + (query.isEmpty() ? "" : "?" + query);
    }

    @Test
    void pluginServesTheBrokerXmlAcceptorOverRdma() {
        assertInstanceOf(RdmaAcceptor.class, broker.server().getRemotingService().getAcceptor("rdma"));
        assertEquals(true, broker.server().getRemotingService().getAcceptor("rdma").isStarted());
    }

    @Test
    void queueWithTransportConfiguration() throws Exception {
        try (ActiveMQConnectionFactory cf = transportConfigurationFactory()) {
            JmsScenarios.queueRoundTrip(cf, "tc.queue", 200);
        }
    }

    @Test
    void topicWithUrl() throws Exception {
        try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create(url("reconnectAttempts=3"))) {
            assertEquals(3, cf.getReconnectAttempts());
            JmsScenarios.topicFanOut(cf, "url.topic", 50);
        }
    }

    @Test
    void transactedSession() throws Exception {
        try (ActiveMQConnectionFactory cf = transportConfigurationFactory()) {
            JmsScenarios.transacted(cf, "tx.queue");
        }
    }

    @Test
    void largeMessageOfTwoMebibytes() throws Exception {
        try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create(url(""))) {
            JmsScenarios.largeMessage(cf, "large.queue", 2 * 1024 * 1024);
        }
    }

    @Test
    void largeMessageSentAsOneFrame() throws Exception {
        // minLargeMessageSize above the body: one 512 KiB Core packet, grown far past its initial buffer
        try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create(url("minLargeMessageSize=1048576"))) {
            JmsScenarios.largeMessage(cf, "big.frame.queue", 512 * 1024);
        }
    }

    @Test
    void slowConsumerLosesNothing() throws Exception {
        try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create(url("consumerWindowSize=65536"))) {
            JmsScenarios.slowConsumer(cf, "slow.queue", 2000, 1024);
        }
    }

    @Test
    void jndiPropertiesFromConfigFolder() throws Exception {
        Properties env = new Properties();
        try (Reader reader = Files.newBufferedReader(EmbeddedBroker.configDir().resolve("jndi.properties"))) {
            env.load(reader);
        }
        // the lab's address in the file becomes this test's endpoint; everything else is used as written
        env.replaceAll((key, value) -> value.toString().replace("10.77.0.1:61700", HOST + ":" + PORT));
        InitialContext context = new InitialContext(env);
        try {
            ConnectionFactory cf = (ConnectionFactory) context.lookup("ConnectionFactory");
            Queue queue = (Queue) context.lookup("queue/orders");
            assertEquals("orders", queue.getQueueName());
            JmsScenarios.queueRoundTrip(cf, queue.getQueueName(), 20);
        } finally {
            context.close();
        }
    }

    @Test
    void coreApiClient() throws Exception {
        TransportConfiguration tc = new TransportConfiguration(RdmaConnectorFactory.class.getName(),
                Map.of("host", HOST, "port", PORT));
        try (ServerLocator locator = ActiveMQClient.createServerLocatorWithoutHA(tc);
             ClientSessionFactory factory = locator.createSessionFactory();
             ClientSession session = factory.createSession()) {
            session.createQueue(QueueConfiguration.of("core.queue").setRoutingType(RoutingType.ANYCAST));
            ClientProducer producer = session.createProducer("core.queue");
            ClientMessage message = session.createMessage(false);
            message.getBodyBuffer().writeString("over rdma");
            producer.send(message);
            session.start();
            ClientConsumer consumer = session.createConsumer("core.queue");
            ClientMessage received = consumer.receive(10_000);
            assertNotNull(received);
            assertEquals("over rdma", received.getBodyBuffer().readString());
            received.acknowledge();
        }
    }
}
