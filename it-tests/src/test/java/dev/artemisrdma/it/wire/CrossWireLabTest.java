package dev.artemisrdma.it.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.artemisrdma.artemis.AcceptorMetrics;
import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.artemis.RdmaTransportMetricsMXBean;
import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.artemis.ConnectedClientMain;
import dev.artemisrdma.it.artemis.LabBroker;
import dev.artemisrdma.it.artemis.LabBrokerMain;
import dev.artemisrdma.it.hosts.LabHost;
import dev.artemisrdma.it.hosts.WireCounters;
import jakarta.jms.Connection;
import jakarta.jms.JMSException;
import jakarta.jms.Session;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Files;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The broker on host A, its JMS clients on host B, each host with its own kernel and rxe device, joined by the lab's
 * wire ({@code rdma-lab run --hosts 2}): every RoCE packet leaves one kernel through a NIC and enters the other.
 * Each test proves that with both hosts' counters (rxe's packets crossed the NIC, no RNR) and checks every message's
 * order and content ({@link WireJmsMain}): on a clean wire, on a wire that loses, duplicates, reorders and corrupts
 * packets ({@code tc netem} on both NICs), across a link flap shorter than the retry budget, which the
 * connections ride out, and across a longer outage, which fails them within the budget and after which the client
 * reconnects with every message delivered exactly once. Flaps and outages pull the cable at host B's NIC
 * ({@link LabHost#cable}: its carrier goes, its routes stay), as a cable, a switch port or a bond failover does.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class CrossWireLabTest {

    private static final int PORT = 61617;
    /** A log line's time of day (hours, minutes, seconds, milliseconds), as SLF4J's simple logger and date print it. */
    private static final String STAMP = "^(\\d\\d):(\\d\\d):(\\d\\d)\\.(\\d{3}) ";
    private static final Pattern TIME_OF_DAY = Pattern.compile(STAMP);
    /** A client log line of the transport failing a connection, with its time of day. */
    private static final Pattern FAILED_LINE = Pattern.compile(STAMP + ".*(lost: |"
            + "stayed down for longer than the retry budget|IBV_WC_RETRY_EXC_ERR)");
    private static final String[] REPAIRS = {"rcvd_seq_err", "duplicate_request", "out_of_seq_request",
        "completer_retry_err", "rcvd_rnr_err"};

    /** How long the long outage lasts: well past the default retry budget. */
    private static final int OUTAGE_SECONDS = 7;
    /** The default retry budget of a connection: (retryCount 6 + 1) x 4.096 us x 2^ackTimeout 17. */
    private static final long BUDGET_MILLIS = Math.round(7 * 4.096e-3 * (1 << 17));

    /**
     * What a pulled cable drops, as a share of rxe's packets: rxe counts every packet and retransmission it sends
     * while the cable is out, the NIC without carrier counts none of them (0.3 s: up to 1 % seen; 7 s: 2.7 %).
     */
    private static final double FLAP_DROPS = 0.05;
    private static final double OUTAGE_DROPS = 0.10;

    private static LabBroker broker;

    @BeforeAll
    static void startBroker() throws Exception {
        LabHost.requireTwoHosts();
        broker = LabBroker.start(LabHost.a().wireAddress(), PORT, Files.createTempDirectory("wire-broker"), true, 0);
    }

    @AfterAll
    static void stopBroker() throws Exception {
        if (broker != null) {
            broker.close();
        }
    }

    @Test
    @Order(1)
    void jmsAcrossTheWireKeepsOrderAndContentAndCrossesTheNics() throws Exception {
        Crossing c = crossing("wire.clean", 300, 11);
        c.assertExactlyOnce(300);
        assertEquals(0, c.a.rnr() + c.b.rnr(), "RNR: " + c);
    }

    /**
     * IPv6 across the wire: a broker on A's IPv6 address (fd78::1) and the JMS program on B connecting to it, rxe's
     * RoCE v2 over IPv6 (GIDs of fd78::/64) crossing both NICs.
     */
    @Test
    @Order(2)
    void jmsOverIpv6CrossesTheWire() throws Exception {
        int port = PORT + 1;
        // a broker of its own, in its own JVM on A: one embedded broker per JVM
        try (JavaProcess v6 = JavaProcess.main(LabBrokerMain.class).name("wire-broker-v6").jvm("-Xmx512m")
                .readyWhen(LabBrokerMain.READY, 180).start("[" + LabHost.a().wireAddress6() + "]",
                        String.valueOf(port), Files.createTempDirectory("wire-broker-v6").toString())) {
            Crossing c = run("wire.ipv6", "rdma://[" + LabHost.a().wireAddress6() + "]:" + port, 200, 14, 0)
                    .crossing();
            c.assertExactlyOnce(200);
            assertEquals(0, c.a.rnr() + c.b.rnr(), "RNR: " + c);
        }
    }

    @Test
    @Order(2)
    void lossyWireIsRepairedByRxeAndNothingIsLostOrDuplicated() throws Exception {
        String netem = "tc qdisc replace dev " + LabHost.WIRE_NIC
                + " root netem delay 100us loss 1% duplicate 0.5% reorder 1% 50% corrupt 0.1%";
        try {
            LabHost.a().sh(netem);
            LabHost.b().sh(netem);
            Crossing c = crossing("wire.lossy", 300, 12);
            c.assertExactlyOnce(300, 0.05); // 1 % loss each way, plus retransmissions that netem drops again
            assertEquals(0, c.a.rnr() + c.b.rnr(), "RNR: " + c);
            long repaired = 0;
            for (String counter : REPAIRS) {
                repaired += c.a.rxe(counter) + c.b.rxe(counter);
            }
            assertTrue(repaired > 0, "netem lost, duplicated and reordered packets on both NICs, yet rxe counted "
                    + "no repair: " + c);
            assertEquals(0, c.a.rxe("retry_exceeded_err") + c.b.rxe("retry_exceeded_err"), "retries exhausted: " + c);
        } finally {
            String clear = "tc qdisc del dev " + LabHost.WIRE_NIC + " root 2>/dev/null; true";
            LabHost.a().sh(clear);
            LabHost.b().sh(clear);
        }
    }

    @Test
    @Order(3)
    void aLinkFlapShorterThanTheRetryBudgetIsRiddenOut() throws Exception {
        int count = 600;
        Run run = run("wire.flap", "rdma://" + LabHost.a().wireAddress() + ":" + PORT, count, 13, 300);
        Crossing c = run.crossing();
        assertEquals(0, c.result().get("failures"), "a link flap of 0.3 s failed a connection: " + c);
        assertEquals(0, c.result().get("reconnects"), "a link flap of 0.3 s made the client reconnect: " + c);
        c.assertExactlyOnce(count, FLAP_DROPS);
    }

    /**
     * The link stays down longer than the retry budget: the connections fail within the budget plus a second
     * (measured on host B's clock, from the port-down event to the client's log line that fails a connection; Artemis's
     * failure listener is bounded too, from the cable request), the client reconnects
     * once the link is back, and its transactions, redone under duplicate detection, deliver every message exactly
     * once.
     */
    @Test
    @Order(4)
    void aLinkDownLongerThanTheBudgetFailsInTimeAndTheClientReconnectsExactlyOnce() throws Exception {
        int count = 600;
        String url = "rdma://" + LabHost.a().wireAddress() + ":" + PORT
                + "?reconnectAttempts=-1&retryInterval=500&connectTimeout=3000";
        Run run = run("wire.outage", url, count, 14, OUTAGE_SECONDS * 1000L);
        Crossing c = run.crossing();
        Map<String, Long> r = c.result();
        // the transport's word: the first line of the client's log that fails a connection of it, counted from
        // the port-down event (the moment host B's kernel knew; the cable request takes a moment to reach QEMU)
        Matcher d = run.firstLine(TIME_OF_DAY, "IBV_EVENT_PORT_ERR on RDMA device");
        assertTrue(d != null, "host B's transport never heard IBV_EVENT_PORT_ERR: " + c);
        Matcher t = run.firstLine(FAILED_LINE, "");
        String detected = run.output().stream().filter(line -> line.startsWith("FAILURE_DETECTED ")).findFirst()
                .orElse(null);
        assertTrue(t != null && detected != null, "the client never saw its connection fail: " + c);
        long transportMillis = millisOfDay(t) - millisOfDay(d);
        System.out.printf("the port-down event came %d ms after the cable request%n",
                millisOfDay(d) - run.pulledAtMillisOfDay());
        long artemisMillis = Long.parseLong(detected.substring(17)) - run.pulledAtEpochMillis();
        System.out.printf("cable of host B pulled for %d s: the transport failed the connection %d ms after the "
                + "port went down (%s), Artemis heard %d ms after the cable went (retry budget %d ms): %s%n",
                OUTAGE_SECONDS, transportMillis, t.group(0), artemisMillis, BUDGET_MILLIS, c);
        assertTrue(transportMillis <= BUDGET_MILLIS + 1000, "the transport failed the connection "
                + transportMillis + " ms after the port went down, more than the retry budget of " + BUDGET_MILLIS
                + " ms + 1 s");
        assertTrue(transportMillis >= 1000, "the connection failed " + transportMillis
                + " ms after the port went down: the transport did not give the link its retry budget");
        // Artemis hears when the channel is released, after its queue pair is destroyed on the completion loop:
        // rxe's ibv_destroy_qp waits for the packets the carrierless NIC still holds (up to about 3 s seen), and
        // a connection on the same loop waits behind it (see the closing note of issue 35)
        assertTrue(artemisMillis <= BUDGET_MILLIS + 4000, "Artemis heard of the failure " + artemisMillis
                + " ms after the cable went");
        assertTrue(r.get("reconnects") >= 1, "no reconnect: " + c);
        assertEquals(0, r.get("gaveUp"), "the client gave up instead of reconnecting: " + c);
        c.assertExactlyOnce(count, OUTAGE_DROPS);
    }

    /**
     * Host B at MTU 1500, host A at 9000: connections come up at the smaller RoCE MTU (1024) and carry messages from
     * 1 B to 1 MiB; before that, each host's rxe reports the active MTU its own NIC allows.
     */
    @Test
    @Order(5)
    void hostsOfDifferentMtusTalkAtTheSmallerRoceMtu() throws Exception {
        String mtu = "ibv_devinfo -d " + LabHost.RDMA_DEVICE + " | awk '/active_mtu/ {print $2}'";
        try {
            LabHost.b().sh("ip link set " + LabHost.WIRE_NIC + " mtu 1500");
            assertEquals("4096", LabHost.a().sh(mtu).strip(), "host A's RoCE MTU at NIC MTU 9000");
            assertEquals("1024", LabHost.b().sh(mtu).strip(), "host B's RoCE MTU at NIC MTU 1500");
            Crossing c = crossing("wire.mtu", 200, 15);
            c.assertExactlyOnce(200);
            assertEquals(0, c.a.rnr() + c.b.rnr(), "RNR: " + c);
        } finally {
            LabHost.b().sh("ip link set " + LabHost.WIRE_NIC + " mtu 9000");
        }
    }

    /**
     * Host B vanishes (its cable pulled for good, so its address stops answering ARP): the broker's open connection
     * to B's consumer fails within the retry budget of the first delivery it cannot get acknowledged (the acceptor's
     * retry-error counter moves, within the budget plus a second), Artemis then drops the consumer, and a new
     * connection to B's address fails within {@code connectTimeout}, naming it.
     */
    @Test
    @Order(6)
    void aVanishedPeerIsReportedWithinTheBudgetOpenAndWithinConnectTimeoutNew() throws Exception {
        String queue = "wire.vanish";
        try (JavaProcess consumer = JavaProcess.driven("wire.vanish", ConnectedClientMain.class)
                .on(LabHost.b()).jvm("-Xmx256m").readyWhen(ConnectedClientMain.READY, 180)
                .start("rdma://" + LabHost.a().wireAddress() + ":" + PORT, queue)) {
            var q = broker.server().locateQueue(SimpleString.of(queue));
            assertEquals(1, q.getConsumerCount(), "host B's consumer");
            LabHost.b().cable(false);
            try (var cf = RdmaConnectionFactories.create("rdma://" + LabHost.a().wireAddress()
                    + ":" + PORT); Connection c = cf.createConnection()) {
                Session session = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
                RdmaTransportMetricsMXBean acceptor = AcceptorMetrics.of(broker.server(), "rdma");
                long retryErrorsBefore = acceptor.getRetryErrors();
                long sending = System.nanoTime();
                session.createProducer(session.createQueue(queue)).send(session.createTextMessage("to B"));
                // the send returns once the broker stored the message, which it then delivers to B's consumer: the
                // delivery's SEND starts the retry budget about now
                long sent = System.nanoTime();
                long deadline = sent + TimeUnit.MILLISECONDS.toNanos(BUDGET_MILLIS + 30_000);
                long failedMillis = -1;
                while ((q.getConsumerCount() > 0 || failedMillis < 0) && System.nanoTime() < deadline) {
                    if (failedMillis < 0 && acceptor.getRetryErrors() > retryErrorsBefore) {
                        failedMillis = (System.nanoTime() - sent) / 1_000_000;
                    }
                    Thread.sleep(20);
                }
                long droppedMillis = (System.nanoTime() - sent) / 1_000_000;
                System.out.printf("host B vanished: the broker's transport failed the connection %d ms after a "
                        + "delivery to B (the producer's send took %d ms), Artemis dropped B's consumer after %d ms "
                        + "(budget %d ms)%n", failedMillis, (sent - sending) / 1_000_000, droppedMillis,
                        BUDGET_MILLIS);
                assertEquals(0, q.getConsumerCount(), "the broker still has the vanished host's consumer after "
                        + droppedMillis + " ms");
                assertTrue(failedMillis >= 0, "the broker's transport counted no IBV_WC_RETRY_EXC_ERR after "
                        + droppedMillis + " ms");
                // the transport's word: the delivery's retries ran out (a completion with IBV_WC_RETRY_EXC_ERR)
                assertTrue(failedMillis <= BUDGET_MILLIS + 1000, "the vanished host's connection failed "
                        + failedMillis + " ms after the first delivery it could not take: more than the retry "
                        + "budget of " + BUDGET_MILLIS + " ms + 1 s");
                // Artemis hears when the channel is released, after its queue pair is destroyed on the completion
                // loop, which rxe may hold for the packets still below it (up to about 3 s in the outage test); then
                // Artemis drops the consumer on its own threads (0.07-0.14 s after the transport in the lab runs;
                // CI once saw 6.6 s in all, which that test did not split)
                assertTrue(droppedMillis <= failedMillis + 4000, "Artemis dropped the vanished host's consumer "
                        + droppedMillis + " ms after the first delivery it could not take, "
                        + (droppedMillis - failedMillis) + " ms after the transport failed its connection");
            }
            long start = System.nanoTime();
            String refused = null;
            try (var cf = RdmaConnectionFactories.create("rdma://" + LabHost.b().wireAddress()
                    + ":" + PORT + "?reconnectAttempts=0&initialConnectAttempts=1&connectTimeout=3000");
                 Connection c = cf.createConnection()) {
                refused = "connected";
            } catch (JMSException e) {
                refused = String.valueOf(e);
            }
            long connectMillis = (System.nanoTime() - start) / 1_000_000;
            System.out.printf("a new connection to the vanished host failed after %d ms (connectTimeout 3000 ms): %s%n",
                    connectMillis, refused);
            assertTrue(!refused.equals("connected") && connectMillis <= 4_000, "a connect to the vanished host: "
                    + refused + " after " + connectMillis + " ms");
        } finally {
            LabHost.b().cable(true);
        }
    }

    // --------------------------------------------------------------------------------------------- helpers

    private static JavaProcess.Builder client(String name) {
        return JavaProcess.driven(name, WireJmsMain.class).on(LabHost.b()).jvm("-Xmx768m")
                .echo(line -> line.startsWith("RESULT") || line.startsWith("PROBLEM") || line.startsWith("CONNECTION")
                        || line.startsWith("FAILED") || line.startsWith("PRODUCER") || line.startsWith("CONSUMER"),
                        20);
    }

    /** Runs {@link WireJmsMain} on host B against the broker on A; its result and both hosts' counters. */
    private static Crossing crossing(String queue, int count, long seed) throws Exception {
        return run(queue, "rdma://" + LabHost.a().wireAddress() + ":" + PORT, count, seed, 0).crossing();
    }

    /**
     * Runs {@link WireJmsMain} on host B against {@code url} and, with {@code pullMillis} above 0, pulls B's cable for
     * that long once the consumer has taken 100 messages: its result, both hosts' counters, its output, and B's clock
     * when the cable was pulled.
     */
    private static Run run(String queue, String url, int count, long seed, long pullMillis) throws Exception {
        WireCounters a0 = LabHost.a().counters();
        WireCounters b0 = LabHost.b().counters();
        try (JavaProcess client = client(queue).keepOutput().start(url, queue, Integer.toString(count),
                Long.toString(seed))) {
            long pulledAtEpoch = 0;
            long pulledAtOfDay = 0;
            String pulled = "";
            if (pullMillis > 0) {
                client.await("PROGRESS 100", 300);
                // B's clock, as the client's log and its failover listener: time of day and epoch, in milliseconds
                String now = LabHost.b().sh("date '+%H:%M:%S.%3N %s%3N'").strip();
                Matcher m = TIME_OF_DAY.matcher(now);
                assertTrue(m.find(), now);
                pulledAtOfDay = millisOfDay(m);
                pulledAtEpoch = Long.parseLong(now.substring(now.indexOf(' ') + 1));
                long t0 = System.nanoTime();
                LabHost.b().cable(false);
                Thread.sleep(pullMillis);
                LabHost.b().cable(true);
                pulled = " (host B's cable pulled for about " + (System.nanoTime() - t0) / 1_000_000 + " ms)";
            }
            Map<String, Long> r = WireJmsMain.result(client.await("RESULT", 540));
            Crossing c = new Crossing(r, LabHost.a().counters().since(a0), LabHost.b().counters().since(b0));
            System.out.println(queue + pulled + ": " + c);
            return new Run(c, client.keptSince(0), pulledAtEpoch, pulledAtOfDay);
        }
    }

    /** A run of {@link WireJmsMain}: its crossing, its output lines, and host B's clock when its cable was pulled. */
    private record Run(Crossing crossing, List<String> output, long pulledAtEpochMillis, long pulledAtMillisOfDay) {

        /** {@code pattern}'s match in the first output line that contains {@code text} and matches it, or null. */
        Matcher firstLine(Pattern pattern, String text) {
            for (String line : output) {
                Matcher m = pattern.matcher(line);
                if (line.contains(text) && m.find()) {
                    return m;
                }
            }
            return null;
        }
    }

    /** The time of day of a log line matched by {@link #TIME_OF_DAY} or {@link #FAILED_LINE}, in milliseconds. */
    private static long millisOfDay(Matcher m) {
        return ((Long.parseLong(m.group(1)) * 60 + Long.parseLong(m.group(2))) * 60 + Long.parseLong(m.group(3)))
                * 1000 + Long.parseLong(m.group(4));
    }


    /** One run's result and what the two hosts' counters say about it. */
    private record Crossing(Map<String, Long> result, WireCounters a, WireCounters b) {

        void assertExactlyOnce(int count) {
            assertExactlyOnce(count, 0);
        }

        /** {@code dropAllowance}: the share of rxe's packets that netem may drop before the NICs count them. */
        void assertExactlyOnce(int count, double dropAllowance) {
            assertEquals(count, result.get("received"), "received: " + this);
            assertEquals(0, result.get("lost"), "lost: " + this);
            assertEquals(0, result.get("duplicated"), "duplicated: " + this);
            assertEquals(0, result.get("bad"), "bad content: " + this);
            // every message crossed twice (producer to broker, broker to consumer): far more packets than messages
            a.requireRoceCrossedTheWire(count, dropAllowance);
            b.requireRoceCrossedTheWire(count, dropAllowance);
        }

        @Override
        public String toString() {
            return result + "; " + a.summary() + "; " + b.summary();
        }
    }
}
