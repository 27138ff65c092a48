package dev.artemisrdma.it.artemis;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;

/**
 * The checks every attack on a {@link HostileBroker} ends with (issue 10, issue 23): a well-behaved JMS client is
 * served over RDMA (the acceptor's transport counters rise, so a fall-back to another transport fails it); the broker's
 * heap after a full GC and the memory its process registered (the kernel's count) stay within their bounds; once the
 * attackers are gone its RDMA kernel objects are back to the baseline. Keeps the figures each attack printed and the
 * peaks, for the test's summary, and counts the broker's log lines so an attack's can be bounded.
 */
final class AttackedBroker {

    /**
     * Heap a broker may need beyond its baseline and the reassembly bound while attacked: the attackers' connection
     * objects, Artemis's per-connection state, the checking clients' sessions.
     */
    private static final long HEAP_SLACK = 24 << 20;

    /** maxCompletionLoops's default. */
    private static final long MAX_LOOPS_PER_DEVICE = 16;

    private final HostileBroker broker;
    private final ActiveMQConnectionFactory client;
    private final long maxRegistered;
    private final Map<String, String> figures = new LinkedHashMap<>();
    private KernelRdmaObjects baseline;
    private Map<String, Long> baselineStats;
    private long heapBound;
    private long heapPeak;
    private long registeredPeak;
    private int checks;
    /** Whether memory regions wait for {@link #regionsBack(String)}, and whether an attack left that comparison to it. */
    private boolean regionsAtEnd;
    private boolean regionsOwed;
    private final long start = System.nanoTime();

    AttackedBroker(HostileBroker broker, ActiveMQConnectionFactory client, long maxRegistered) {
        this.broker = broker;
        this.client = client;
        this.maxRegistered = maxRegistered;
    }

    KernelRdmaObjects baseline() {
        return baseline;
    }

    /** Takes the baseline (kernel objects, heap after GC) once the warm-up traffic made what the broker keeps. */
    void baseline(long reassemblyMemory) throws Exception {
        baseline = settledObjects();
        baselineStats = broker.heap();
        long heapBaseline = baselineStats.get("heapAfterGc");
        heapBound = heapBaseline + reassemblyMemory + HEAP_SLACK;
        figures.put("baseline", "heap after GC " + mib(heapBaseline) + ", kernel objects " + baseline + " (e.g. "
                + baseline.sample() + ")");
        broker.resetPeak();
    }

    void figure(String key, String value) {
        figures.put(key, value);
    }

    void notePeakRegistered(long bytes) {
        registeredPeak = Math.max(registeredPeak, bytes);
    }

    /**
     * The broker serves a well-behaved client over RDMA, within its bounds, and its kernel objects are back: the
     * baseline's, plus what an attack made the transport add that it keeps by design and bounds (a completion loop,
     * with its completion queue, and the loop's shared receive pool, with its memory region: up to maxCompletionLoops
     * per device; honest load adds them too).
     */
    void afterAttack(String attack, String what) throws Exception {
        wellBehavedClientIsServed(attack);
        Map<String, Long> stats = broker.heap();
        checkBounds(attack, stats);
        long addedLoops = sinceBaseline(stats, "loops");
        long addedPools = sinceBaseline(stats, "sharedReceivePools");
        long addedPoolBytes = sinceBaseline(stats, "sharedReceivePoolBytes");
        assertTrue(stats.get("loops") <= MAX_LOOPS_PER_DEVICE * 2, attack + ": " + stats.get("loops")
                + " completion loops on the lab's two devices, above maxCompletionLoops");
        Map<String, Integer> expected = new TreeMap<>(baseline.connectionObjects());
        expected.merge("cq", (int) addedLoops, Integer::sum);
        KernelRdmaObjects now = settledObjects(expected);
        assertEquals(expected, now.connectionObjects(), attack + ": queue pairs, cm ids, completion queues and "
                + "protection domains after the attackers left (the baseline's, and a completion queue for each of the "
                + addedLoops + " loops the transport added)");
        if (regionsAtEnd) {
            // the memory regions are compared once, after the last attack (regionsBack): each comparison may wait a
            // minute for the transport's slab trim, which five attacks in a row turned into four minutes of CI
            regionsOwed = true;
        } else {
            now = regionsBack(attack, now, addedPools, addedPoolBytes);
        }
        String added = addedLoops == 0 ? "" : "; the transport keeps " + addedLoops + " more loops and " + addedPools
                + " more pools than at the baseline (" + stats.get("loops") + " loops)";
        figures.put(attack, what + "; heap after GC " + mib(stats.get("heapAfterGc")) + ", kernel " + now + added);
    }

    /**
     * Memory regions are compared once, by {@link #regionsBack(String)} after the last attack, instead of after each:
     * kernel objects (queue pairs, cm ids, completion queues) are still compared after each.
     */
    void compareRegionsAtTheEnd() {
        regionsAtEnd = true;
    }

    /** After the last attack: the memory regions are back (see {@link #compareRegionsAtTheEnd}). */
    void regionsBack(String when) throws Exception {
        if (!regionsOwed) {
            return;
        }
        Map<String, Long> stats = broker.heap();
        KernelRdmaObjects now = regionsBack(when, KernelRdmaObjects.now(), sinceBaseline(stats, "sharedReceivePools"),
                sinceBaseline(stats, "sharedReceivePoolBytes"));
        figures.put(when, "kernel " + now);
        regionsOwed = false;
    }

    /** How much the broker's counter {@code key} in {@code stats} grew since the baseline. */
    private long sinceBaseline(Map<String, Long> stats, String key) {
        return stats.get(key) - baselineStats.get(key);
    }

    /**
     * Waits (at most 65 s) until the broker's memory regions are the baseline's, plus the shared pools the transport
     * added, and fails the attack if they are not.
     */
    private KernelRdmaObjects regionsBack(String attack, KernelRdmaObjects now, long addedPools, long addedPoolBytes)
            throws Exception {
        // idle send slabs may have been deregistered (30 s): fewer memory regions, never more. A slab the attack's
        // traffic added beside the baseline's (the client's large messages in flight at once) is deregistered by
        // the transport's trim, which runs every 30 s and takes slabs idle for 30 s: up to a minute. A leak stays.
        long regions = baseline.memoryRegions() + addedPools;
        long bytes = baseline.foreignRegisteredBytes() + addedPoolBytes;
        long slabDeadline = System.currentTimeMillis() + 65_000;
        while (!(now.memoryRegions() <= regions && now.foreignRegisteredBytes() <= bytes)
                && System.currentTimeMillis() < slabDeadline) {
            Thread.sleep(1_000);
            now = KernelRdmaObjects.now();
        }
        assertTrue(now.memoryRegions() <= regions && now.foreignRegisteredBytes() <= bytes, attack
                + ": memory regions " + now + " against baseline " + baseline + " and " + addedPools + " shared pools ("
                + addedPoolBytes + " bytes) the transport added (a minute after the attackers left)");
        return now;
    }

    /** Heap after GC within the bound, registered memory (the kernel's and the transport's count) within its cap. */
    void checkBounds(String when, Map<String, Long> stats) {
        long heap = stats.get("heapAfterGc");
        heapPeak = Math.max(heapPeak, heap);
        assertTrue(heap <= heapBound, when + ": the broker's heap after GC is " + mib(heap) + ", above "
                + mib(heapBound));
        long registered = KernelRdmaObjects.now().foreignRegisteredBytes();
        registeredPeak = Math.max(registeredPeak, registered);
        assertTrue(registered <= maxRegistered, when + ": the broker process has " + registered
                + " bytes registered (the kernel's count), above maxRegisteredMemory " + maxRegistered);
        long ours = stats.get("registeredMemoryBytes") + stats.get("sendPoolBytes");
        assertTrue(ours <= maxRegistered, when + ": the acceptor's transport reports " + ours + " bytes registered");
        if (when.endsWith("(while held)")) {
            figures.put(when, "heap after GC " + mib(heap) + ", registered " + mib(registered));
        }
    }

    /** A JMS round trip through the broker; RDMA carried it: the acceptor's counters rose. */
    void wellBehavedClientIsServed(String after) throws Exception {
        wellBehavedClientIsServed(after, client);
    }

    /** As {@link #wellBehavedClientIsServed(String)}, through {@code via} (another address of the broker). */
    void wellBehavedClientIsServed(String after, ActiveMQConnectionFactory via) throws Exception {
        Map<String, Long> before = broker.stats();
        String text = "served after " + after;
        try (Connection connection = via.createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue("hostile.check");
            session.createProducer(queue).send(session.createTextMessage(text));
            MessageConsumer consumer = session.createConsumer(queue);
            TextMessage got = (TextMessage) consumer.receive(20_000);
            assertNotNull(got, after + ": the well-behaved client got nothing back");
            assertEquals(text, got.getText());
        }
        Map<String, Long> stats = broker.stats();
        assertTrue(stats.get("connectionsAccepted") > before.get("connectionsAccepted")
                && stats.get("framesReceived") - before.get("framesReceived") >= 5
                && stats.get("bytesReceived") - before.get("bytesReceived") >= text.length(),
                after + ": the acceptor's transport counters did not rise: " + before + " -> " + stats);
        checks++;
    }

    /** {@code count} JMS messages of {@code size} bytes (Artemis large messages) through the broker, intact. */
    void largeMessagesServed(String when, int count, int size) throws Exception {
        byte[] body = new byte[size];
        new Random(size).nextBytes(body);
        try (Connection connection = client.createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue("hostile.large");
            MessageProducer producer = session.createProducer(queue);
            for (int i = 0; i < count; i++) {
                BytesMessage m = session.createBytesMessage();
                m.writeBytes(body);
                producer.send(m);
            }
            MessageConsumer consumer = session.createConsumer(queue);
            for (int i = 0; i < count; i++) {
                BytesMessage got = (BytesMessage) consumer.receive(20_000);
                assertNotNull(got, when + ": large message " + i + " did not come back");
                byte[] back = new byte[(int) got.getBodyLength()];
                got.readBytes(back);
                assertArrayEquals(body, back, when + ": large message " + i);
            }
        }
        checks++;
    }

    void countCheck() {
        checks++;
    }

    /** The broker's kernel objects once its connections are gone and the counts have settled (bounded wait). */
    KernelRdmaObjects settledObjects() throws InterruptedException {
        return settledObjects(baseline == null ? null : baseline.connectionObjects());
    }

    private KernelRdmaObjects settledObjects(Map<String, Integer> expected) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 20_000;
        while (broker.stats().get("connections") > 0 && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        KernelRdmaObjects last = KernelRdmaObjects.now();
        while (System.currentTimeMillis() < deadline) {
            Thread.sleep(200);
            KernelRdmaObjects now = KernelRdmaObjects.now();
            if (now.sameAs(last) && (expected == null || now.connectionObjects().equals(expected))) {
                return now;
            }
            last = now;
        }
        return last;
    }

    /** Lines the broker wrote to its log so far (a mark to count an attack's lines from). */
    long logLines() throws IOException {
        try (var lines = Files.lines(broker.log())) {
            return lines.count();
        }
    }

    /** Prints the figures, the bounds and the peaks. */
    void printSummary(String test, String bounds) {
        System.out.println(test + " figures (bounds: " + bounds + ", heap bound " + mib(heapBound) + "):");
        figures.forEach((k, v) -> System.out.println("  " + k + ": " + v));
        System.out.println("  peaks: heap after GC " + mib(heapPeak) + " of " + mib(heapBound)
                + " allowed; registered memory " + mib(registeredPeak) + " of " + mib(maxRegistered)
                + "; " + checks + " well-behaved clients served; "
                + TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start) + " s");
    }

    static String mib(long bytes) {
        return String.format("%.1f MiB", bytes / 1048576.0);
    }
}
