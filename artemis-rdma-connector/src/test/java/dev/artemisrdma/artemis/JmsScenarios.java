package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.ConnectionFactory;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import jakarta.jms.Topic;

/**
 * JMS scenarios over any {@link ConnectionFactory}, written once and run here on the fake fabric and later in the
 * lab on real RDMA. Each checks content, order and completeness, not just that nothing threw.
 */
public final class JmsScenarios {

    private static final long RECEIVE_MS = 10_000;

    private JmsScenarios() {
    }

    /** {@code count} text messages through a queue, in order, body and property intact. */
    public static void queueRoundTrip(ConnectionFactory cf, String queueName, int count) throws JMSException {
        try (Connection connection = cf.createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(queueName);
            MessageProducer producer = session.createProducer(queue);
            MessageConsumer consumer = session.createConsumer(queue);
            for (int i = 0; i < count; i++) {
                TextMessage message = session.createTextMessage("message " + i + " to " + queueName);
                message.setIntProperty("seq", i);
                producer.send(message);
            }
            for (int i = 0; i < count; i++) {
                TextMessage received = (TextMessage) consumer.receive(RECEIVE_MS);
                assertNotNull(received, "message " + i + " of " + count + " not received");
                assertEquals("message " + i + " to " + queueName, received.getText());
                assertEquals(i, received.getIntProperty("seq"));
            }
            assertNull(consumer.receiveNoWait(), "more messages than were sent");
        }
    }

    /** Two subscribers of one topic each get every message published after they subscribed. */
    public static void topicFanOut(ConnectionFactory cf, String topicName, int count) throws JMSException {
        try (Connection connection = cf.createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic(topicName);
            MessageConsumer first = session.createConsumer(topic);
            MessageConsumer second = session.createConsumer(topic);
            MessageProducer producer = session.createProducer(topic);
            for (int i = 0; i < count; i++) {
                producer.send(session.createTextMessage("price " + i));
            }
            for (MessageConsumer subscriber : new MessageConsumer[] {first, second}) {
                for (int i = 0; i < count; i++) {
                    TextMessage received = (TextMessage) subscriber.receive(RECEIVE_MS);
                    assertNotNull(received, "subscriber missed message " + i);
                    assertEquals("price " + i, received.getText());
                }
            }
        }
    }

    /** Rolled back sends never arrive, committed ones do; a rolled back receive is redelivered. */
    public static void transacted(ConnectionFactory cf, String queueName) throws JMSException {
        try (Connection connection = cf.createConnection()) {
            connection.start();
            Session session = connection.createSession(true, Session.SESSION_TRANSACTED);
            Queue queue = session.createQueue(queueName);
            MessageProducer producer = session.createProducer(queue);
            MessageConsumer consumer = session.createConsumer(queue);

            producer.send(session.createTextMessage("rolled back"));
            session.rollback();
            producer.send(session.createTextMessage("committed"));
            session.commit();

            TextMessage received = (TextMessage) consumer.receive(RECEIVE_MS);
            assertNotNull(received);
            assertEquals("committed", received.getText());
            session.rollback();

            TextMessage again = (TextMessage) consumer.receive(RECEIVE_MS);
            assertNotNull(again, "rolled back receive not redelivered");
            assertEquals("committed", again.getText());
            assertTrue(again.getJMSRedelivered());
            session.commit();
            assertNull(consumer.receive(200), "the rolled back send arrived");
            session.commit();
        }
    }

    /** A message of {@code size} bytes (larger than a receive slot and than minLargeMessageSize) arrives intact. */
    public static void largeMessage(ConnectionFactory cf, String queueName, int size) throws JMSException {
        byte[] body = new byte[size];
        for (int i = 0; i < size; i++) {
            body[i] = (byte) (i * 31 + (i >>> 11));
        }
        try (Connection connection = cf.createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(queueName);
            BytesMessage message = session.createBytesMessage();
            message.writeBytes(body);
            session.createProducer(queue).send(message);

            BytesMessage received = (BytesMessage) session.createConsumer(queue).receive(RECEIVE_MS * 3);
            assertNotNull(received, "large message not received");
            assertEquals(size, received.getBodyLength());
            byte[] got = new byte[size];
            assertEquals(size, received.readBytes(got));
            assertArrayEquals(body, got);
        }
    }

    /**
     * A fast producer against a consumer that sleeps on every message: the backlog is held back by flow control
     * (credits, writability), and every message still arrives, once and in order.
     */
    public static void slowConsumer(ConnectionFactory cf, String queueName, int count, int bodySize)
            throws Exception {
        String padding = "x".repeat(bodySize);
        try (Connection consumerConnection = cf.createConnection();
             Connection producerConnection = cf.createConnection()) {
            Session consumerSession = consumerConnection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = consumerSession.createQueue(queueName);
            MessageConsumer consumer = consumerSession.createConsumer(queue);
            CountDownLatch done = new CountDownLatch(1);
            AtomicReference<String> failure = new AtomicReference<>();
            int[] next = {0};
            consumer.setMessageListener((Message message) -> {
                try {
                    int seq = message.getIntProperty("seq");
                    if (seq != next[0]) {
                        failure.compareAndSet(null, "expected message " + next[0] + ", got " + seq);
                    }
                    next[0] = seq + 1;
                    if (next[0] % 50 == 0) {
                        Thread.sleep(5);
                    }
                    if (next[0] == count) {
                        done.countDown();
                    }
                } catch (Exception e) {
                    failure.compareAndSet(null, e.toString());
                }
            });
            consumerConnection.start();

            Session producerSession = producerConnection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = producerSession.createProducer(queue);
            for (int i = 0; i < count; i++) {
                TextMessage message = producerSession.createTextMessage(padding);
                message.setIntProperty("seq", i);
                producer.send(message);
            }
            assertTrue(done.await(60, TimeUnit.SECONDS), "slow consumer got " + next[0] + " of " + count);
            assertNull(failure.get());
        }
    }
}
