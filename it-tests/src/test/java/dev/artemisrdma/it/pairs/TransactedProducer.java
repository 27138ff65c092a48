package dev.artemisrdma.it.pairs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.JMSException;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import jakarta.jms.TransactionRolledBackException;
import org.apache.activemq.artemis.api.core.ActiveMQException;
import org.apache.activemq.artemis.api.core.ActiveMQExceptionType;

/**
 * Transactions of 10 durable 1 KiB messages with duplicate detection, in a loop: a batch rolled back by a
 * failover, or whose commit's outcome is unknown, is sent again (refused as a duplicate if it was committed).
 */
final class TransactedProducer implements Runnable {
    private static final String DUPLICATE_ID = "_AMQ_DUPL_ID";

    final Connection connection;
    final String queue;
    final Set<Integer> committed = Collections.synchronizedSet(new TreeSet<>());
    final AtomicLong commits = new AtomicLong();
    final AtomicLong longestGapNanos = new AtomicLong();
    final AtomicInteger rolledBack = new AtomicInteger();
    final AtomicInteger unknown = new AtomicInteger();
    final AtomicInteger duplicates = new AtomicInteger();
    final AtomicReference<Throwable> failure = new AtomicReference<>();
    volatile boolean running = true;

    TransactedProducer(Connection connection, String queue) {
        this.connection = connection;
        this.queue = queue;
    }

    @Override
    public void run() {
        try (Session session = connection.createSession(true, Session.SESSION_TRANSACTED)) {
            Queue q = session.createQueue(queue);
            MessageProducer producer = session.createProducer(q);
            producer.setDeliveryMode(DeliveryMode.PERSISTENT);
            byte[] body = new byte[1024];
            long last = System.nanoTime();
            for (int first = 0; running; first += 10) {
                boolean afterUnknown = false;
                while (true) {
                    try {
                        for (int i = first; i < first + 10; i++) {
                            BytesMessage m = session.createBytesMessage();
                            m.writeBytes(body);
                            m.setIntProperty("seq", i);
                            m.setStringProperty(DUPLICATE_ID, queue + "-" + i);
                            producer.send(m);
                        }
                        session.commit();
                        break;
                    } catch (TransactionRolledBackException e) {
                        rolledBack.incrementAndGet();
                    } catch (JMSException e) {
                        ActiveMQExceptionType type = e.getCause() instanceof ActiveMQException c ? c.getType()
                                : null;
                        if (type == ActiveMQExceptionType.DUPLICATE_ID_REJECTED && afterUnknown) {
                            duplicates.incrementAndGet();
                            break;
                        }
                        if (type != ActiveMQExceptionType.TRANSACTION_OUTCOME_UNKNOWN) {
                            throw e;
                        }
                        unknown.incrementAndGet();
                        afterUnknown = true;
                    }
                }
                long now = System.nanoTime();
                longestGapNanos.accumulateAndGet(now - last, Math::max);
                last = now;
                for (int i = first; i < first + 10; i++) {
                    committed.add(i);
                }
                commits.incrementAndGet();
            }
        } catch (Throwable t) {
            failure.set(t);
        }
    }

    void awaitCommits(long n, long seconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (commits.get() < n && failure.get() == null && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        assertTrue(commits.get() >= n, "the producer committed " + commits.get() + " transactions in " + seconds
                + " s: " + failure.get());
        longestGapNanos.set(0); // the start-up's waits are not the pull's
    }

    long longestGapMillis() {
        return longestGapNanos.get() / 1_000_000;
    }

    /** Nothing reached the application and the client never failed over: the pull stayed on host B's side. */
    void assertUntroubled(List<String> events) {
        assertNull(failure.get(), "an exception reached the producer");
        assertEquals(0, rolledBack.get() + unknown.get(), "transactions rolled back or of unknown outcome");
        assertEquals(List.of(), events, "the client on A failed over or reconnected");
    }
}
