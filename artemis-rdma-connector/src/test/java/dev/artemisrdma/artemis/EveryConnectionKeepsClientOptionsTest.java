package dev.artemisrdma.artemis;

import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import org.apache.activemq.artemis.api.core.ActiveMQException;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.server.ActiveMQComponent;
import org.apache.activemq.artemis.spi.core.remoting.BaseConnectionLifeCycleListener;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.config.impl.ConfigurationImpl;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A standalone broker answers a client's topology request with an empty connector pair, and the Artemis client then
 * takes its first connection's {@code getConnectorConfig()} as the broker's connector: every later connection of the
 * factory is made from it. It must therefore carry the client's own options (metricsName, batchDelay, device), as
 * Netty's does; found by the JMS soak, whose producer connections were counted under the default metrics name.
 */
class EveryConnectionKeepsClientOptionsTest {

    private static final int PORT = 61751;

    @TempDir
    Path dataDir;

    @Test
    void laterConnectionsOfAFactoryAreMadeWithTheUrlsOptions() throws Exception {
        TestRuntime.install();
        Configuration config = EmbeddedBroker.testable(new ConfigurationImpl(), dataDir)
                .addAcceptorConfiguration(new TransportConfiguration(RdmaAcceptorFactory.class.getName(),
                        Map.of("host", "127.0.0.1", "port", PORT), "rdma"));
        int messages = 100;
        int body = 10_000;
        try (EmbeddedBroker broker = EmbeddedBroker.start(config, null);
             ActiveMQConnectionFactory cf = RdmaConnectionFactories.create("rdma://127.0.0.1:" + PORT
                     + "?metricsName=options-kept&batchDelay=0")) {
            Connection consumerConnection = cf.createConnection();
            Connection producerConnection = cf.createConnection();
            RdmaTransportMetricsMXBean counters = RdmaClientMetrics.counters("options-kept");
            assertEquals(2, counters.getConnections(), "both connections of the factory count under its metricsName");
            assertNull(RdmaClientMetrics.counters("127.0.0.1:" + PORT), "no connection fell back to the default name");

            Session cs = consumerConnection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer consumer = cs.createConsumer(cs.createQueue("options"));
            consumerConnection.start();
            Session ps = producerConnection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = ps.createProducer(ps.createQueue("options"));
            for (int i = 0; i < messages; i++) {
                BytesMessage m = ps.createBytesMessage();
                m.writeBytes(new byte[body]);
                producer.send(m);
            }
            for (int i = 0; i < messages; i++) {
                assertNotNull(consumer.receive(10_000), "message " + i);
            }
            consumerConnection.close();
            producerConnection.close();
            assertTrue(counters.getBytesSent() >= (long) messages * body, "the producer's bytes are the factory's: "
                    + counters.getBytesSent());
            assertTrue(counters.getBytesReceived() >= (long) messages * body, "and the consumer's: "
                    + counters.getBytesReceived());
        }
    }

    @Test
    void aClientConnectionDescribesItselfWithEveryOptionOfItsConnector() {
        Map<String, Object> client = Map.of("host", "10.0.0.1", "port", 61700, "metricsName", "orders",
                "batchDelay", 5, "device", "rxe0", "rnrRetryCount", "0");
        RdmaConnection connection = new RdmaConnection(client, (id, buffer) -> { }, new NoEvents(), Runnable::run,
                0, false);
        Map<String, Object> described = connection.getConnectorConfig().getParams();
        assertEquals("orders", described.get("metricsName"));
        assertEquals(5, described.get("batchDelay"));
        assertEquals("rxe0", described.get("device"), "a client's device is its own, and stays");
        assertEquals("0", described.get("rnrRetryCount"));
    }

    private static final class NoEvents implements BaseConnectionLifeCycleListener<Object> {
        @Override
        public void connectionCreated(ActiveMQComponent component, org.apache.activemq.artemis.spi.core.remoting
                .Connection connection, Object protocol) {
        }

        @Override
        public void connectionDestroyed(Object connectionID, boolean failed) {
        }

        @Override
        public void connectionException(Object connectionID, ActiveMQException me) {
        }

        @Override
        public void connectionReadyForWrites(Object connectionID, boolean ready) {
        }
    }
}
