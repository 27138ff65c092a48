package dev.artemisrdma.it.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.artemis.LabBroker;
import dev.artemisrdma.it.hosts.LabHost;
import dev.artemisrdma.it.hosts.WireCounters;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;

import java.nio.file.Files;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The broker on host A, its JMS clients on host B, each host with its own kernel and rxe device, joined by the lab's
 * wire ({@code rdma-lab run --hosts 2}): every RoCE packet leaves one kernel through a NIC and enters the other.
 * Each test proves that with both hosts' counters (rxe's packets crossed the NIC, no RNR) and checks every message's
 * order and content ({@link WireJmsMain}): on a clean wire, on a wire that loses, duplicates, reorders and corrupts
 * packets ({@code tc netem} on both NICs), and across a link flap shorter than the retry budget, which the
 * connections ride out.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class CrossWireLabTest {

    private static final int PORT = 61617;
    private static final Pattern RESULT = Pattern.compile("RESULT (.*)");
    private static final String[] REPAIRS = {"rcvd_seq_err", "duplicate_request", "out_of_seq_request",
        "completer_retry_err", "rcvd_rnr_err"};

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
        WireCounters a0 = LabHost.a().counters();
        WireCounters b0 = LabHost.b().counters();
        int count = 600;
        try (JavaProcess client = client("wire.flap")
                .start("rdma://" + LabHost.a().wireAddress() + ":" + PORT, "wire.flap", Integer.toString(count), "13")) {
            client.await("PROGRESS 100", 300);
            long t0 = System.nanoTime();
            LabHost.b().sh("ip link set " + LabHost.WIRE_NIC + " down; sleep 0.3; ip link set " + LabHost.WIRE_NIC
                    + " up");
            long outageMs = (System.nanoTime() - t0) / 1_000_000;
            Map<String, Long> r = result(client.await("RESULT", 540));
            Crossing c = new Crossing(r, LabHost.a().counters().since(a0), LabHost.b().counters().since(b0));
            System.out.printf("link flap of about %d ms on host B's %s: %s%n", outageMs, LabHost.WIRE_NIC, c);
            assertEquals(0, r.get("failures"), "a link flap of 0.3 s failed a connection: " + c);
            c.assertExactlyOnce(count);
        }
    }

    // --------------------------------------------------------------------------------------------- helpers

    private static JavaProcess.Builder client(String name) {
        return JavaProcess.driven(name, WireJmsMain.class).on(LabHost.b()).jvm("-Xmx768m")
                .echo(line -> line.startsWith("RESULT") || line.startsWith("PROBLEM") || line.startsWith("CONNECTION")
                        || line.startsWith("FAILED"), 20);
    }

    /** Runs {@link WireJmsMain} on host B against the broker on A; its result and both hosts' counters. */
    private static Crossing crossing(String queue, int count, long seed) throws Exception {
        WireCounters a0 = LabHost.a().counters();
        WireCounters b0 = LabHost.b().counters();
        try (JavaProcess client = client(queue)
                .start("rdma://" + LabHost.a().wireAddress() + ":" + PORT, queue, Integer.toString(count),
                        Long.toString(seed))) {
            Map<String, Long> r = result(client.await("RESULT", 540));
            Crossing c = new Crossing(r, LabHost.a().counters().since(a0), LabHost.b().counters().since(b0));
            System.out.println(queue + ": " + c);
            return c;
        }
    }

    private static Map<String, Long> result(String line) {
        Matcher m = RESULT.matcher(line);
        assertTrue(m.matches(), line);
        Map<String, Long> values = new LinkedHashMap<>();
        for (String kv : m.group(1).split(" ")) {
            String[] p = kv.split("=");
            values.put(p[0], Math.round(Double.parseDouble(p[1])));
        }
        return values;
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
