package dev.artemisrdma.it.artemis;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.Lab;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import org.apache.activemq.artemis.jms.client.ActiveMQConnection;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.api.core.client.FailoverEventType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * SIGKILL the broker under a connected client: the client notices within seconds (the peer's rdma_cm id is torn
 * down by the kernel, the client sees the disconnect, not a connection-TTL minute later), reconnects to the
 * restarted broker, and every durable message is still there.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class BrokerKillLabTest {

    @Test
    void killedBrokerIsNoticedWithinSecondsAndTheClientReconnectsWithoutLosingDurableMessages() throws Exception {
        killAndRestart(Lab.addr0(), null);
    }

    /**
     * The scenario with the broker on {@code brokerAddress} of {@code brokerHost} (null: this host) and the client
     * here; returns how long the client took to notice the kill, in milliseconds.
     */
    static long killAndRestart(String brokerAddress, dev.artemisrdma.it.hosts.LabHost brokerHost) throws Exception {
        int port = Lab.freshPort();
        Path data = Files.createTempDirectory("killed-broker");
        JavaProcess broker = startBroker(brokerAddress, port, data, brokerHost);
        CountDownLatch failureDetected = new CountDownLatch(1);
        CountDownLatch reconnected = new CountDownLatch(1);
        try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create("rdma://" + brokerAddress + ":" + port
                + "?reconnectAttempts=-1&retryInterval=500&maxRetryInterval=1000");
             Connection connection = cf.createConnection()) {
            ((ActiveMQConnection) connection).setFailoverListener(event -> {
                if (event == FailoverEventType.FAILURE_DETECTED) {
                    failureDetected.countDown();
                } else if (event == FailoverEventType.FAILOVER_COMPLETED) {
                    reconnected.countDown();
                }
            });
            connection.start();
            Session session = connection.createSession(true, Session.SESSION_TRANSACTED);
            Queue queue = session.createQueue("durable.orders");
            MessageProducer producer = session.createProducer(queue);
            producer.setDeliveryMode(DeliveryMode.PERSISTENT);
            for (int i = 0; i < 200; i++) {
                TextMessage m = session.createTextMessage("order " + i);
                m.setIntProperty("seq", i);
                producer.send(m);
            }
            session.commit();
            MessageConsumer consumer = session.createConsumer(queue);
            for (int i = 0; i < 50; i++) {
                assertNotNull(consumer.receive(10_000), "before the kill, message " + i);
            }
            session.commit(); // 150 durable messages remain

            long killedAt = System.nanoTime();
            broker.kill();
            assertTrue(failureDetected.await(15, TimeUnit.SECONDS), "client did not notice the dead broker");
            long noticedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killedAt);
            System.out.println("client noticed the killed broker after " + noticedMillis + " ms");

            broker = startBroker(brokerAddress, port, data, brokerHost);
            assertTrue(reconnected.await(120, TimeUnit.SECONDS), "client did not reconnect to the restarted broker");

            Set<Integer> remaining = new TreeSet<>();
            TextMessage m;
            while ((m = (TextMessage) receiveRetrying(session, consumer)) != null) {
                remaining.add(m.getIntProperty("seq"));
            }
            session.commit();
            assertEquals(150, remaining.size(), "durable messages after the restart: " + remaining);
            for (int i = 50; i < 200; i++) {
                assertTrue(remaining.contains(i), "message " + i + " lost");
            }
            return noticedMillis;
        } finally {
            broker.close();
        }
    }

    /** {@link LabBrokerMain} in a child JVM on {@code host} (null: here), its output echoed; returns once ready. */
    private static JavaProcess startBroker(String address, int port, Path data, dev.artemisrdma.it.hosts.LabHost host)
            throws Exception {
        return JavaProcess.main(LabBrokerMain.class).on(host).jvm("-Xmx1g", "-XX:TieredStopAtLevel=1")
                .readyWhen(LabBrokerMain.READY, 180).echo(line -> true)
                .start(address, Integer.toString(port), data.toString());
    }

    /** After a failover the first transacted operation may be rolled back by Artemis; retry that once. */
    private static jakarta.jms.Message receiveRetrying(Session session, MessageConsumer consumer) throws Exception {
        try {
            return consumer.receive(5_000);
        } catch (jakarta.jms.TransactionRolledBackException e) {
            session.rollback();
            return consumer.receive(5_000);
        }
    }
}
