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

    /**
     * A client without reconnection whose connection is lost (here: the acceptor stopped under it) lets go of the
     * shared transport. Artemis never closes the connector of such a connection (it closes a lost connection's
     * connector only when it reconnects), so the connector gives its lease back itself; before, the transport, its
     * completion loop and registered memory stayed open for the life of the JVM (found by OwnershipLabTest).
     */
    @Test
    void aLostConnectionWithoutReconnectionLetsGoOfTheTransport() throws Exception {
        int port = 61733;
        int openBefore = RdmaRuntime.openTransports();
        try (EmbeddedBroker broker = EmbeddedBroker.fromBrokerXml(dataDir, HOST, port)) {
            // a configuration of its own: the client's transport is not shared with the broker's or another test's
            try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create(
                    "rdma://" + HOST + ":" + port + "?reconnectAttempts=0&receiveSlots=256")) {
                Connection connection = cf.createConnection();
                CountDownLatch failed = new CountDownLatch(1);
                connection.setExceptionListener(e -> failed.countDown());
                connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
                broker.server().getRemotingService().getAcceptor("rdma").stop();
                assertTrue(failed.await(5, TimeUnit.SECONDS), "the client told of the lost connection");
                connection.close();
                broker.server().getRemotingService().getAcceptor("rdma").start();
            }
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(RdmaRuntime.RETRY_LINGER_MS + 5_000);
        while (RdmaRuntime.openTransports() > openBefore && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        assertEquals(openBefore, RdmaRuntime.openTransports(), "transports open after the broker and client closed");
    }
}
