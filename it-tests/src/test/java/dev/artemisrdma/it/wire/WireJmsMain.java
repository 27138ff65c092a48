package dev.artemisrdma.it.wire;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.it.SoakMix;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.JMSException;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import org.apache.activemq.artemis.api.core.ActiveMQException;
import org.apache.activemq.artemis.api.core.ActiveMQExceptionType;
import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.api.core.client.FailoverEventType;
import org.apache.activemq.artemis.jms.client.ActiveMQConnection;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;

import java.nio.ByteBuffer;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The cross-wire JMS program, run on the host that is not the broker's: a transacted producer (a commit every
 * {@value #BATCH} messages, each message with a duplicate-detection id) and a transacted consumer on connections of
 * their own, {@link SoakMix} sizes and content (1 B to 1 MiB), the consumer checking each message's sequence number,
 * size and bytes. It prints {@code PROGRESS n} as the consumer goes, then {@code RESULT sent=.. received=.. lost=..
 * duplicated=.. bad=.. failures=.. reconnects=.. gaveUp=.. rollbacks=.. maxCommitGapMs=.. seconds=.. bytes=..}, or
 * {@code FAILED why}. A connection failure (Artemis's exception listener, which also hears failures it then
 * reconnects from), a reconnect (its failover listener, printed as {@code FAILURE_DETECTED epochMillis}) and a
 * reconnect given up ({@code FAILOVER_FAILED}) are counted, not hidden: a test that expects a link flap to be
 * ridden out asserts both are 0. With {@code reconnectAttempts} in the URL, a transaction that fails over is rolled
 * back and redone (the producer resends its batch under the same duplicate-detection ids, the consumer takes the
 * messages again from its last commit), so exactly-once still holds and is checked. A producer's commit whose reply
 * the failure took may have been applied: its resend is then refused as a duplicate, which ends that batch (the same
 * refusal of a batch that never failed is a defect and fails the producer).
 *
 * <p>Arguments: the {@code rdma://} URL, the queue, the message count, the seed.
 */
public final class WireJmsMain {

    static final int BATCH = 10;
    private static final long RECEIVE_TIMEOUT_MS = 120_000;

    private WireJmsMain() {
    }

    /**
     * The values of a {@code RESULT k=v k=v ...} line this program printed, rounded to whole numbers; fails the
     * calling test when the line is not one.
     */
    static Map<String, Long> result(String line) {
        org.junit.jupiter.api.Assertions.assertTrue(line != null && line.startsWith("RESULT "), line);
        Map<String, Long> values = new LinkedHashMap<>();
        for (String kv : line.substring("RESULT ".length()).strip().split(" ")) {
            String[] p = kv.split("=");
            values.put(p[0], Math.round(Double.parseDouble(p[1])));
        }
        return values;
    }

    public static void main(String[] args) throws Exception {
        String url = args[0];
        String queue = args[1];
        int count = Integer.parseInt(args[2]);
        SoakMix mix = new SoakMix(Long.parseLong(args[3]), count, 0);
        AtomicInteger failures = new AtomicInteger();
        AtomicInteger reconnects = new AtomicInteger();
        AtomicInteger rollbacks = new AtomicInteger();
        AtomicInteger gaveUp = new AtomicInteger();
        AtomicLong maxGap = new AtomicLong();
        AtomicLong bytes = new AtomicLong();
        long start = System.nanoTime();
        ActiveMQConnectionFactory cf = RdmaConnectionFactories.create(url);
        try (Connection producerConnection = cf.createConnection();
             Connection consumerConnection = cf.createConnection()) {
            for (Connection c : new Connection[] {producerConnection, consumerConnection}) {
                c.setExceptionListener(e -> {
                    failures.incrementAndGet();
                    System.out.println("CONNECTION FAILED " + e);
                });
                ((ActiveMQConnection) c).setFailoverListener(event -> {
                    if (event == FailoverEventType.FAILURE_DETECTED) {
                        reconnects.incrementAndGet();
                        System.out.println("FAILURE_DETECTED " + System.currentTimeMillis());
                    } else if (event == FailoverEventType.FAILOVER_FAILED) {
                        gaveUp.incrementAndGet();
                        System.out.println("FAILOVER_FAILED " + System.currentTimeMillis());
                    } else {
                        System.out.println(event + " " + System.currentTimeMillis());
                    }
                });
            }
            consumerConnection.start();
            Session consumerSession = consumerConnection.createSession(true, Session.SESSION_TRANSACTED);
            MessageConsumer consumer = consumerSession.createConsumer(consumerSession.createQueue(queue));
            Thread producer = new Thread(() -> produce(producerConnection, queue, mix, count, maxGap, failures,
                    rollbacks, gaveUp), "wire-producer");
            producer.start();
            int received = 0;
            int duplicated = 0;
            int bad = 0;
            int next = 0;
            // what the last commit settled: a rolled-back transaction takes the consumer back there
            int committedReceived = 0;
            int committedDuplicated = 0;
            int committedBad = 0;
            int committedNext = 0;
            // a commit that failed over may have been applied ("AMQ219031 ... commit may have been successful"): the
            // counts at the failure, kept until the next message tells (it follows the batch: applied; it repeats the
            // batch: rolled back)
            int[] inDoubt = null;
            String firstProblem = null;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(600);
            while (next < count && System.nanoTime() < deadline) {
                try {
                    BytesMessage m = (BytesMessage) consumer.receive(RECEIVE_TIMEOUT_MS);
                    if (m == null) {
                        break;
                    }
                    int seq = m.getIntProperty("seq");
                    if (inDoubt != null) {
                        if (seq == inDoubt[3] && inDoubt[3] != committedNext) {
                            System.out.println("IN-DOUBT COMMIT of " + committedNext + ".." + (inDoubt[3] - 1)
                                    + " was applied");
                            received = committedReceived = inDoubt[0];
                            duplicated = committedDuplicated = inDoubt[1];
                            bad = committedBad = inDoubt[2];
                            next = committedNext = inDoubt[3];
                        }
                        inDoubt = null;
                    }
                    received++;
                    byte[] body = new byte[(int) m.getBodyLength()];
                    m.readBytes(body);
                    bytes.addAndGet(body.length);
                    if (seq < next) {
                        duplicated++;
                        firstProblem = firstProblem == null ? "message " + seq + " again after " + (next - 1)
                                : firstProblem;
                    } else {
                        if (seq > next) {
                            firstProblem = firstProblem == null ? "message " + seq + " after " + (next - 1)
                                    + ": " + (seq - next) + " lost" : firstProblem;
                        }
                        String problem = mix.check(ByteBuffer.wrap(body), seq);
                        if (problem != null) {
                            bad++;
                            firstProblem = firstProblem == null ? problem : firstProblem;
                        }
                        next = seq + 1;
                    }
                    if (received % BATCH == 0 || next == count) {
                        consumerSession.commit();
                        committedReceived = received;
                        committedDuplicated = duplicated;
                        committedBad = bad;
                        committedNext = next;
                    }
                    if (received % 100 == 0) {
                        System.out.println("PROGRESS " + received);
                    }
                } catch (JMSException e) {
                    if (gaveUp.get() > 0) {
                        throw e; // the connection failed for good (no reconnectAttempts in the URL)
                    }
                    rollbacks.incrementAndGet();
                    System.out.println("CONSUMER ROLLBACK at " + committedNext + ": " + e);
                    inDoubt = new int[] {received, duplicated, bad, next};
                    try {
                        consumerSession.rollback();
                    } catch (JMSException again) {
                        // the failover already rolled it back
                    }
                    received = committedReceived;
                    duplicated = committedDuplicated;
                    bad = committedBad;
                    next = committedNext;
                }
            }
            producer.join(RECEIVE_TIMEOUT_MS);
            int lost = count - (received - duplicated);
            double seconds = (System.nanoTime() - start) / 1e9;
            if (firstProblem != null) {
                System.out.println("PROBLEM " + firstProblem);
            }
            System.out.printf("RESULT sent=%d received=%d lost=%d duplicated=%d bad=%d failures=%d reconnects=%d "
                    + "gaveUp=%d rollbacks=%d maxCommitGapMs=%d seconds=%.1f bytes=%d%n", count, received, lost,
                    duplicated, bad, failures.get(), reconnects.get(), gaveUp.get(), rollbacks.get(), maxGap.get(),
                    seconds, bytes.get());
        } catch (Exception e) {
            System.out.println("FAILED " + e);
            e.printStackTrace(System.out);
        }
        System.out.flush();
        System.exit(0);
    }

    private static void produce(Connection connection, String queue, SoakMix mix, int count, AtomicLong maxGap,
                                AtomicInteger failures, AtomicInteger rollbacks, AtomicInteger gaveUp) {
        try {
            Session session = connection.createSession(true, Session.SESSION_TRANSACTED);
            MessageProducer producer = session.createProducer(session.createQueue(queue));
            long last = System.nanoTime();
            long deadline = last + TimeUnit.SECONDS.toNanos(600);
            int batchStart = 0;
            // the batch failed once already: its commit may have been applied before the connection went (Artemis
            // does not always say "outcome unknown"), so a duplicate refusal of its next try means it was committed
            boolean batchFailedBefore = false;
            while (batchStart < count) {
                int batchEnd = Math.min(count, batchStart + BATCH);
                try {
                    for (int seq = batchStart; seq < batchEnd; seq++) {
                        BytesMessage m = session.createBytesMessage();
                        ByteBuffer body = ByteBuffer.allocate(mix.size(seq));
                        mix.fill(body, seq);
                        m.writeBytes(body.array());
                        m.setIntProperty("seq", seq);
                        m.setStringProperty(Message.HDR_DUPLICATE_DETECTION_ID.toString(), queue + "-" + seq);
                        producer.send(m);
                    }
                    session.commit();
                    long now = System.nanoTime();
                    maxGap.accumulateAndGet((now - last) / 1_000_000, Math::max);
                    last = now;
                    batchStart = batchEnd;
                    batchFailedBefore = false;
                } catch (JMSException e) {
                    // a failover rolled the transaction back (or it failed before the commit): redo the batch; the
                    // broker's duplicate detection drops what had arrived already
                    rollbacks.incrementAndGet();
                    System.out.println("PRODUCER ROLLBACK at " + batchStart + ": " + e);
                    if (System.nanoTime() > deadline || gaveUp.get() > 0) {
                        throw e; // out of time, or the connection failed for good (no reconnectAttempts)
                    }
                    try {
                        session.rollback();
                    } catch (JMSException again) {
                        // rolled back already
                    }
                    boolean duplicate = e.getCause() instanceof ActiveMQException cause
                            && cause.getType() == ActiveMQExceptionType.DUPLICATE_ID_REJECTED;
                    if (duplicate && !batchFailedBefore) {
                        throw e; // refused as a duplicate before any failure: a batch sent twice, a defect
                    }
                    if (duplicate) {
                        // the failed try's commit was applied: the batch is in the queue once, go on to the next
                        System.out.println("PRODUCER IN-DOUBT COMMIT of " + batchStart + ".." + (batchEnd - 1)
                                + " was applied (its resend was refused as a duplicate)");
                        batchStart = batchEnd;
                        batchFailedBefore = false;
                    } else {
                        batchFailedBefore = true;
                    }
                }
            }
        } catch (Exception e) {
            failures.incrementAndGet();
            System.out.println("FAILED producer: " + e);
        }
    }
}
