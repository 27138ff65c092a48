package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import jakarta.jms.Connection;
import jakarta.jms.JMSException;
import jakarta.jms.Session;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The broker.properties path, and what a client sees when its broker goes away. */
class BrokerLifecycleTest {

    private static final String HOST = "127.0.0.1";

    @TempDir
    Path dataDir;

    @BeforeAll
    static void runtime() {
        TestRuntime.install();
    }

    @Test
    void brokerPropertiesFromConfigFolder() throws Exception {
        int port = 61731;
        try (EmbeddedBroker broker = EmbeddedBroker.fromBrokerProperties(dataDir, HOST, port)) {
            assertInstanceOf(RdmaAcceptor.class, broker.server().getRemotingService().getAcceptor("rdma"));
            try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create("rdma://" + HOST + ":" + port)) {
                long copiedBefore = RdmaConnection.COPIED_PACKETS.sum();
                long zeroCopyBefore = RdmaConnection.ZERO_COPY_PACKETS.sum();
                JmsScenarios.queueRoundTrip(cf, "props.queue", 100);
                assertEquals(copiedBefore, RdmaConnection.COPIED_PACKETS.sum(),
                        "every Core packet was sent from registered memory");
                assertTrue(RdmaConnection.ZERO_COPY_PACKETS.sum() - zeroCopyBefore >= 200,
                        "100 messages sent and received went out as fewer than 200 zero-copy packets");
            }
        }
    }

    @Test
    void brokerStopIsSeenByTheClientQuickly() throws Exception {
        int port = 61732;
        EmbeddedBroker broker = EmbeddedBroker.fromBrokerXml(dataDir, HOST, port);
        try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create(
                "rdma://" + HOST + ":" + port + "?reconnectAttempts=0")) {
            Connection connection = cf.createConnection();
            CountDownLatch failed = new CountDownLatch(1);
            AtomicReference<JMSException> failure = new AtomicReference<>();
            connection.setExceptionListener(e -> {
                failure.set(e);
                failed.countDown();
            });
            connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            long stopped = System.nanoTime();
            broker.close();
            assertTrue(failed.await(5, TimeUnit.SECONDS), "client not told of the broker stop within 5 s");
            long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - stopped);
            assertNotNull(failure.get());
            assertTrue(millis < 5000, "took " + millis + " ms");
            connection.close();
        } finally {
            broker.close();
        }
    }
}
