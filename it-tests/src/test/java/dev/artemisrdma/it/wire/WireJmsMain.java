package dev.artemisrdma.it.wire;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.it.SoakMix;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import org.apache.activemq.artemis.api.core.Message;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;

import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The cross-wire JMS program, run on the host that is not the broker's: a transacted producer (a commit every
 * {@value #BATCH} messages, each message with a duplicate-detection id) and a transacted consumer on connections of
 * their own, {@link SoakMix} sizes and content (1 B to 1 MiB), the consumer checking each message's sequence number,
 * size and bytes. It prints {@code PROGRESS n} as the consumer goes, then {@code RESULT sent=.. received=.. lost=..
 * duplicated=.. bad=.. failures=.. maxCommitGapMs=.. seconds=.. bytes=..}, or {@code FAILED why}. A connection
 * failure (Artemis's exception listener) is counted, not hidden: a test that expects a link flap to be ridden out
 * asserts {@code failures=0}.
 *
 * <p>Arguments: the {@code rdma://} URL, the queue, the message count, the seed.
 */
public final class WireJmsMain {

    static final int BATCH = 10;
    private static final long RECEIVE_TIMEOUT_MS = 120_000;

    private WireJmsMain() {
    }

    public static void main(String[] args) throws Exception {
        String url = args[0];
        String queue = args[1];
        int count = Integer.parseInt(args[2]);
        SoakMix mix = new SoakMix(Long.parseLong(args[3]), count, 0);
        AtomicInteger failures = new AtomicInteger();
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
            }
            consumerConnection.start();
            Session consumerSession = consumerConnection.createSession(true, Session.SESSION_TRANSACTED);
            MessageConsumer consumer = consumerSession.createConsumer(consumerSession.createQueue(queue));
            Thread producer = new Thread(() -> produce(producerConnection, queue, mix, count, maxGap, failures),
                    "wire-producer");
            producer.start();
            int received = 0;
            int duplicated = 0;
            int bad = 0;
            int next = 0;
            String firstProblem = null;
            while (next < count) {
                BytesMessage m = (BytesMessage) consumer.receive(RECEIVE_TIMEOUT_MS);
                if (m == null) {
                    break;
                }
                received++;
                int seq = m.getIntProperty("seq");
                byte[] body = new byte[(int) m.getBodyLength()];
                m.readBytes(body);
                bytes.addAndGet(body.length);
                if (seq < next) {
                    duplicated++;
                    firstProblem = firstProblem == null ? "message " + seq + " again after " + (next - 1) : firstProblem;
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
                }
                if (received % 100 == 0) {
                    System.out.println("PROGRESS " + received);
                }
            }
            producer.join(RECEIVE_TIMEOUT_MS);
            int lost = count - (received - duplicated);
            double seconds = (System.nanoTime() - start) / 1e9;
            if (firstProblem != null) {
                System.out.println("PROBLEM " + firstProblem);
            }
            System.out.printf("RESULT sent=%d received=%d lost=%d duplicated=%d bad=%d failures=%d maxCommitGapMs=%d "
                    + "seconds=%.1f bytes=%d%n", count, received, lost, duplicated, bad, failures.get(), maxGap.get(),
                    seconds, bytes.get());
        } catch (Exception e) {
            System.out.println("FAILED " + e);
            e.printStackTrace(System.out);
        }
        System.out.flush();
        System.exit(0);
    }

    private static void produce(Connection connection, String queue, SoakMix mix, int count, AtomicLong maxGap,
                                AtomicInteger failures) {
        try {
            Session session = connection.createSession(true, Session.SESSION_TRANSACTED);
            MessageProducer producer = session.createProducer(session.createQueue(queue));
            long last = System.nanoTime();
            for (int seq = 0; seq < count; seq++) {
                BytesMessage m = session.createBytesMessage();
                ByteBuffer body = ByteBuffer.allocate(mix.size(seq));
                mix.fill(body, seq);
                m.writeBytes(body.array());
                m.setIntProperty("seq", seq);
                m.setStringProperty(Message.HDR_DUPLICATE_DETECTION_ID.toString(), queue + "-" + seq);
                producer.send(m);
                if ((seq + 1) % BATCH == 0 || seq == count - 1) {
                    session.commit();
                    long now = System.nanoTime();
                    maxGap.accumulateAndGet((now - last) / 1_000_000, Math::max);
                    last = now;
                }
            }
        } catch (Exception e) {
            failures.incrementAndGet();
            System.out.println("FAILED producer: " + e);
        }
    }
}
