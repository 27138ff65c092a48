package dev.artemisrdma.it.artemis;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.Lab;
import dev.artemisrdma.it.hosts.LabHost;
import dev.artemisrdma.it.hosts.WireCounters;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 37's holes 2, 3 and 4 attacked from the second host of the two-host lab. One broker on host A
 * ({@link HostileBroker}: its own JVM, the acceptor's defaults but a reassemblyMemory of 8 MiB, listening on every
 * address, IPv4 and IPv6), one attacker process on host B ({@link WireAttackerMain}: raw verbs peers, not our
 * transport), and a well-behaved JMS client on host A's IPv4 address, another source than any of B's:
 * <ol>
 *   <li>hole 2, reassembly squatters: 8 idle connections keep the buffer of a whole 128 KiB frame between frames (an
 *       eighth of the budget), 7 squatters each hold all but one byte of a 1 MiB frame (exactly their fair share):
 *       the budget is full, and the client's 100 KiB JMS message must still arrive within 2 s;</li>
 *   <li>hole 3, pending connections from 8 and then from 64 IPv6 addresses of host B in one /64 (added to B's
 *       {@code wire0} for the attack), 512 requests each time that never finish their handshake: the broker counts
 *       the /64 as one source and holds at most maxPendingConnectionsPerSource (64) for it, and the client connects
 *       and is served within 2 s meanwhile; then from 8 IPv4 aliases of B (each its own source under
 *       ipv4SourcePrefix 32), 4 requests each to a second broker whose maxPendingConnections is 16: they fill it, the
 *       broker refuses the aliases beyond it, and still admits the client, which holds none, within 2 s;</li>
 *   <li>hole 4, CM messages dropped: B's NIC drops its own DREQ and DREP MADs ({@code tc} on {@code wire0}'s
 *       egress), and B's peers, 32 at a time, provoke the broker into closing their connections and never answer its
 *       DREQs. Where the kernel then holds a closed connection's cm_id (its rdma_destroy_id waits for the DREQ's
 *       retries, up to about 66 s), DestroyBacklog refuses B once 64 wait; the kernel's ids stay within that, the
 *       client is served within 2 s, and once the filter is gone the kernel objects are back. On 6.1's rxe the
 *       destroys cancel the unanswered DREQs and hold nothing: the test says "not reproduced" and checks the rest.</li>
 * </ol>
 * After each: the client is served over RDMA, the broker's heap after GC and registered memory were within bounds
 * while attacked, its RDMA kernel objects are back to the baseline ({@link AttackedBroker}), and B's NIC and rxe
 * counters prove the attack crossed the wire. Each prints a {@code figure:} line.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class CrossWireAttacksLabTest {

    private static final long MAX_REGISTERED = 1L << 30; // maxRegisteredMemory's default
    private static final long REASSEMBLY_MEMORY = 8L << 20;
    /** Small enough that B makes the squatters' 7 MiB in seconds under emulation; the shares scale with it. */
    private static final String BOUNDS = "reassemblyMemory=8m&maxReassemblyBytes=2m";
    private static final int MESSAGE = 100 << 10;
    private static final long SERVED_WITHIN_MILLIS = 2_000;
    private static final int PENDING_PER_SOURCE = 64; // maxPendingConnectionsPerSource's default
    /**
     * The IPv4-alias attack's broker (a second one): maxPendingConnections 16 and 4 per source, so that B's 8 aliases
     * fill the total within one handshakeTimeout (10 s) even though A's broker accepts only a few requests a second
     * under emulation (with the default 512, 160 requests never held more than 32 at once).
     */
    private static final int SMALL_BACKLOG = 16;
    private static final int SMALL_PER_SOURCE = 4;
    /** Requests from each of B's IPv4 aliases: 8 x 4 = 32, twice the small broker's backlog. */
    private static final int PER_ALIAS = SMALL_PER_SOURCE;
    /**
     * How long the sustained flood of hole 3 lasts: longer than handshakeTimeout (10 s), so that its first 64
     * admissions expire while it goes on, and shorter than twice it plus the teardown, so that with the expired places
     * held for another handshakeTimeout the /64 is given its 64 places twice at most (three times without).
     */
    private static final long SUSTAINED_MILLIS = 25_000;
    /** Requests from the /64 in hole 3's IPv6 attacks. */
    private static final int FROM_SLASH64 = 512;
    /** DestroyBacklog.MAX_PER_SOURCE. */
    private static final int DESTROYS_PER_SOURCE = 64;
    /** receiveSlots x slotSize by default: what a connection with its own receive queue registers. */
    private static final long CONNECTION_RECEIVE_BYTES = 64L * 16 * 1024;
    /** How long the kernel may still hold the closed connections' cm_ids once B answers the broker's DREQs again. */
    private static final long DRAIN_SECONDS = 90;

    private final List<String> late = new ArrayList<>();
    /**
     * How long the same client took to connect and be served on the quiet lab, before any attack: the yardstick for
     * the times under attack (on this emulated host a JMS connection alone costs a good part of the 2 s).
     */
    private long quietServedMillis;
    private HostileBroker broker;
    private AttackedBroker attacked;
    private ActiveMQConnectionFactory client;
    private JavaProcess attacker;
    private String hostA4;
    private String hostA6;
    private int port;

    @Test
    void attacksFromHostBLeaveAnotherSourceServedWithinBounds() throws Exception {
        LabHost.requireTwoHosts();
        hostA4 = LabHost.a().wireAddress();
        hostA6 = LabHost.a().wireAddress6();
        port = Lab.freshPort();
        try (HostileBroker b = HostileBroker.start("[::]", port, Files.createTempDirectory("wire-attacks"), BOUNDS);
             ActiveMQConnectionFactory cf = RdmaConnectionFactories.create("rdma://" + hostA4 + ":" + port
                     + "?reconnectAttempts=0");
             JavaProcess onB = JavaProcess.driven("attacker-on-b", WireAttackerMain.class).on(LabHost.b())
                     .jvm("-Xmx512m").start()) {
            broker = b;
            client = cf;
            attacker = onB;
            attacker.await("READY", 180);
            attacked = new AttackedBroker(b, cf, MAX_REGISTERED);
            try {
                attacked.wellBehavedClientIsServed("warm-up");
                attacked.largeMessagesServed("warm-up", 1, MESSAGE); // the large buffers' send slab exists
                long q0 = System.nanoTime();
                attacked.wellBehavedClientIsServed("the quiet lab");
                quietServedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - q0);
                System.out.println("figure: the client from " + hostA4 + " connected and served in "
                        + quietServedMillis + " ms on the quiet lab, before any attack");
                attacked.baseline(REASSEMBLY_MEMORY);

                reassemblySquatters();
                pendingFromOneSlash64(8, 0);
                pendingFromOneSlash64(64, 0);
                pendingFromOneSlash64(8, SUSTAINED_MILLIS);
                pendingFromIpv4Aliases(8);
                cmMessagesDropped();
                assertTrue(late.isEmpty(), "clients served later than " + SERVED_WITHIN_MILLIS + " ms: " + late);
            } finally {
                attacked.printSummary("CrossWireAttacksLabTest", "the acceptor's defaults, reassemblyMemory "
                        + AttackedBroker.mib(REASSEMBLY_MEMORY));
            }
        }
    }

    // ---------------------------------------------------------------------------------------------- hole 2

    /**
     * 8 idle connections keep a 128 KiB buffer each, 7 squatters hold all but one byte of a 1 MiB frame each: the
     * budget (8 MiB) is full, no connection holds more than its fair share (8 MiB over the 7 squatters and the client).
     * A client connected before the attack sends a 100 KiB JMS message (a large message: chunks that are fragmented
     * frames needing reassembly room) and must get it back within 2 s.
     */
    private void reassemblySquatters() throws Exception {
        String attack = "hole 2: reassembly squatters";
        WireCounters before = LabHost.b().counters();
        int mark = broker.outputMark();
        byte[] body = new byte[MESSAGE];
        new Random(37).nextBytes(body);
        long took;
        String squatting;
        try (Connection connection = client.createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue("wire.squatters");
            MessageProducer producer = session.createProducer(queue);
            MessageConsumer consumer = session.createConsumer(queue);
            attacker.send("squat " + hostA4 + " " + port + " 8 " + (128 << 10) + " 7 " + (1 << 20));
            squatting = attacker.await("SQUATTING", 180);
            attacked.checkBounds(attack + " (while held)", broker.heap());
            long t0 = System.nanoTime();
            BytesMessage m = session.createBytesMessage();
            m.writeBytes(body);
            producer.send(m);
            BytesMessage got = (BytesMessage) consumer.receive(20_000);
            took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            assertNotNull(got, attack + ": the client's 100 KiB message did not come back within 20 s ("
                    + squatting + ")");
            byte[] back = new byte[(int) got.getBodyLength()];
            got.readBytes(back);
            assertArrayEquals(body, back, attack + ": the client's 100 KiB message");
        }
        attacked.countCheck();
        WireCounters crossed = LabHost.b().counters().since(before);
        List<String> reassembly = broker.linesSince(mark).stream().filter(l -> l.contains("reassembly")).toList();
        String what = "B: " + squatting + "; the client's 100 KiB message sent and back in " + took + " ms; broker "
                + "lines on reassembly: " + reassembly.size() + (reassembly.isEmpty() ? "" : " (first: "
                + reassembly.get(0) + ")") + "; B's wire: rxe sent " + crossed.rxe("sent_pkts") + ", NIC tx "
                + crossed.nic("tx_packets") + " packets, " + AttackedBroker.mib(crossed.nic("tx_bytes"));
        System.out.println("figure: " + attack + ": " + what);
        assertTrue(took <= SERVED_WITHIN_MILLIS, attack + ": the client's 100 KiB message took " + took + " ms");
        // the squatters' 7 MiB and the idle peers' 1 MiB left B's NIC as RoCE
        crossed.requireRoceCrossedTheWire(400);
        assertTrue(crossed.nic("tx_bytes") >= 8L << 20, attack + ": B's NIC sent " + crossed.nic("tx_bytes")
                + " bytes, less than the 8 MiB of the attack: " + crossed.summary());
        release();
        attacked.afterAttack(attack, what);
    }

    // ---------------------------------------------------------------------------------------------- hole 3

    /**
     * 512 requests that never finish their handshake from {@code addresses} IPv6 addresses of host B in one /64 (512 /
     * {@code addresses} from each, the addresses in turn): without a prefix as the key, 8 addresses x 64 would fill
     * maxPendingConnections (512) and shut every other source out. The broker holds at most 64 for the /64 (its queue
     * pairs, counted by the kernel while the requests come), refuses the rest naming the /64, and a client from
     * another source connects and is served within 2 s meanwhile. The requests come as fast as B makes them, or
     * spread over {@code spreadMillis}: a flood that outlasts handshakeTimeout, whose first admissions expire and are
     * torn down while it goes on (measured then: the client is timed from half way); the expired places are held for
     * another handshakeTimeout, so the /64's places are given at most 1 + W / 20 s times over the W s of the flood.
     */
    private void pendingFromOneSlash64(int addresses, long spreadMillis) throws Exception {
        String attack = "hole 3: pending connections from " + addresses + " addresses of one /64"
                + (spreadMillis > 0 ? ", spread over " + spreadMillis / 1000 + " s" : "");
        List<String> sources = new ArrayList<>();
        for (int i = 1; i <= addresses; i++) {
            sources.add("fd78::b:" + Integer.toHexString(i));
        }
        String added = addAddresses(sources);
        try {
            Map<String, Long> statsBefore = broker.stats();
            WireCounters before = LabHost.b().counters();
            int mark = broker.outputMark();
            int baseQps = attacked.baseline().foreign("qp");
            long baseRegistered = attacked.baseline().foreignRegisteredBytes();
            Peaks peaks = Peaks.start();
            long served;
            long connectOnly;
            String busyWhileServed;
            String pending;
            long admitting;
            try {
                long attackStart = System.nanoTime();
                attacker.send("pending " + hostA6 + " " + port + " " + FROM_SLASH64 / addresses + " "
                        + String.join(",", sources) + " " + spreadMillis);
                attacker.await("MADE", 300);
                CpuUse cpu0 = CpuUse.now();
                long c0 = System.nanoTime();
                try (Connection probe = client.createConnection()) {
                    connectOnly = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - c0);
                }
                long t0 = System.nanoTime();
                attacked.wellBehavedClientIsServed(attack + " (while flooding)");
                served = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                busyWhileServed = CpuUse.now().since(cpu0);
                attacked.checkBounds(attack + " (while held)", broker.heap());
                pending = attacker.await("PENDING", 300);
                // B's requests and the client's two connections
                admitting = untilEveryRequestAnswered(statsBefore, FROM_SLASH64 + 2, attackStart);
            } finally {
                peaks.stop();
            }
            Map<String, Long> statsAfter = broker.stats();
            long refused = grew(statsBefore, statsAfter, "connectionsRefused");
            long accepted = grew(statsBefore, statsAfter, "connectionsAccepted");
            String perSource = broker.linesSince(mark).stream().filter(l -> l.contains("rejected connection from")
                    && l.contains("/64 (" + PENDING_PER_SOURCE + ", maxPendingConnectionsPerSource)")).findFirst()
                    .orElse(null); // the log is limited to 10 refusals in 10 s, whatever their reason
            WireCounters crossed = LabHost.b().counters().since(before);
            attacked.notePeakRegistered(peaks.registered.get());
            String what = "B (" + added + "): " + pending + "; the broker's queue pairs at most " + peaks.qps.get()
                    + " (baseline " + baseQps + ", cap " + PENDING_PER_SOURCE + " per source), registered at most "
                    + AttackedBroker.mib(peaks.registered.get()) + " (baseline " + AttackedBroker.mib(baseRegistered)
                    + "); refused " + refused + ", accepted " + accepted + " (the client's included); a client from "
                    + hostA4 + " connected alone in " + connectOnly + " ms, connected and served in " + served
                    + " ms (" + quietServedMillis + " ms on the quiet lab; host A's CPUs meanwhile: " + busyWhileServed
                    + "); B's wire: rxe sent "
                    + crossed.rxe("sent_pkts") + ", received " + crossed.rxe("rcvd_pkts") + " packets; refusal: "
                    + (perSource == null ? "none logged" : perSource.substring(perSource.indexOf("rejected")));
            System.out.println("figure: " + attack + ": " + what);
            assertTrue(pending.startsWith("PENDING made " + FROM_SLASH64 + " failed 0"), pending);
            if (served > SERVED_WITHIN_MILLIS) { // recorded, failed at the end: the next attack still runs
                late.add(attack + ": the client from another source took " + served + " ms (" + quietServedMillis
                        + " ms on the quiet lab)");
            }
            assertTrue(peaks.qps.get() - baseQps <= PENDING_PER_SOURCE + 2, attack + ": the broker held "
                    + (peaks.qps.get() - baseQps) + " queue pairs, above maxPendingConnectionsPerSource for the /64 "
                    + "(and the client's)");
            assertTrue(peaks.registered.get() - baseRegistered <= (PENDING_PER_SOURCE + 2) * CONNECTION_RECEIVE_BYTES
                    + (16L << 20), attack + ": the broker registered " + AttackedBroker.mib(peaks.registered.get())
                    + " while held, baseline " + AttackedBroker.mib(baseRegistered));
            // each admitted request holds its place for handshakeTimeout (10 s) at least, and once it expired for as
            // long again after its teardown: over the W s in which the broker answered the flood (longer than B took
            // to send it when A's vCPUs are busy: the requests wait in the kernel for the broker's event thread), each
            // of the /64's 64 places can have been given 1 + W / 20 s times at most
            long bound = PENDING_PER_SOURCE * (1 + admitting / 20_000) + 2; // and the client twice
            assertTrue(accepted <= bound, attack + ": the broker accepted " + accepted + " requests, above " + bound
                    + " for one source over the " + admitting + " ms it took to answer them: " + what);
            assertTrue(refused >= FROM_SLASH64 - bound, attack + ": the broker refused only " + refused + ": " + what);
            crossed.requireRoceCrossedTheWire(FROM_SLASH64);
            release();
        } finally {
            removeAddresses(sources);
        }
        attacked.afterAttack(attack, "512 unfinished requests from " + addresses + " addresses, at most the cap held");
    }

    /**
     * {@value #PER_ALIAS} requests that never finish from each of 8 IPv4 aliases of host B (10.78.0.96-103, in turn),
     * against a second broker with maxPendingConnections {@value #SMALL_BACKLOG} and {@value #SMALL_PER_SOURCE} per
     * source: each alias is its own source (ipv4SourcePrefix 32) and within its cap, so together they fill the total,
     * and the requests beyond it are refused naming maxPendingConnections. Before, a full backlog refused every source;
     * now a source that holds none of it is still admitted: a client from A connects and is served within 2 s.
     */
    private void pendingFromIpv4Aliases(int aliases) throws Exception {
        String attack = "hole 3: pending connections from " + aliases + " IPv4 aliases";
        int requests = PER_ALIAS * aliases;
        List<String> sources = new ArrayList<>();
        for (int i = 0; i < aliases; i++) {
            sources.add("10.78.0." + (96 + i));
        }
        StringBuilder add = new StringBuilder();
        for (String a : sources) {
            add.append("ip addr add ").append(a).append("/24 dev ").append(LabHost.WIRE_NIC).append(" || exit 1; ");
        }
        add.append("n=0; for t in $(seq 100); do n=$(cat /sys/class/infiniband/").append(LabHost.RDMA_DEVICE)
                .append("/ports/1/gids/* 2>/dev/null | grep -c ':ffff:0a4e:006[0-7]$'); [ \"$n\" -ge ")
                .append(aliases).append(" ] && break; sleep 0.1; done; echo \"$n GIDs\"");
        int smallPort = Lab.freshPort();
        try (HostileBroker small = HostileBroker.start("[::]", smallPort, Files.createTempDirectory("wire-aliases"),
                     "maxPendingConnections=" + SMALL_BACKLOG + "&maxPendingConnectionsPerSource=" + SMALL_PER_SOURCE);
             ActiveMQConnectionFactory smallClient = RdmaConnectionFactories.create("rdma://" + hostA4 + ":"
                     + smallPort + "?reconnectAttempts=0")) {
            AttackedBroker smallAttacked = new AttackedBroker(small, smallClient, MAX_REGISTERED);
            smallAttacked.wellBehavedClientIsServed("warm-up of the small broker");
            String added = LabHost.b().sh(add.toString()).strip() + " for " + aliases + " aliases";
            try {
                Map<String, Long> statsBefore = small.stats();
                WireCounters before = LabHost.b().counters();
                int mark = small.outputMark();
                int baseQps = KernelRdmaObjects.now().foreign("qp");
                Peaks peaks = Peaks.start();
                long served;
                String pending;
                try {
                    attacker.send("pending " + hostA4 + " " + smallPort + " " + PER_ALIAS + " "
                            + String.join(",", sources));
                    pending = attacker.await("PENDING", 300);
                    // the broker takes the requests in over seconds: wait until one was refused for the total
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                    while (small.linesSince(mark).stream().noneMatch(l -> l.contains("maxPendingConnections) and"))
                            && System.nanoTime() < deadline) {
                        Thread.sleep(100);
                    }
                    long t0 = System.nanoTime();
                    smallAttacked.wellBehavedClientIsServed(attack + " (backlog full)");
                    served = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                } finally {
                    peaks.stop();
                }
                Map<String, Long> statsAfter = small.stats();
                long refused = grew(statsBefore, statsAfter, "connectionsRefused");
                long accepted = grew(statsBefore, statsAfter, "connectionsAccepted");
                String full = small.linesSince(mark).stream().filter(l -> l.contains("rejected connection from")
                        && l.contains("(" + SMALL_BACKLOG + ", maxPendingConnections) and ")).findFirst()
                        .orElse(null);
                WireCounters crossed = LabHost.b().counters().since(before);
                String what = "B (" + added + "): " + pending + "; the brokers' queue pairs at most " + peaks.qps.get()
                        + " (before " + baseQps + ", maxPendingConnections " + SMALL_BACKLOG + ", "
                        + SMALL_PER_SOURCE + " per source); refused " + refused + ", accepted " + accepted
                        + " (the client's included); a client from " + hostA4 + " connected and served in " + served
                        + " ms (" + quietServedMillis + " ms on the quiet lab); B's wire: rxe sent "
                        + crossed.rxe("sent_pkts") + " packets; refusal: "
                        + (full == null ? "none logged" : full.substring(full.indexOf("rejected")));
                System.out.println("figure: " + attack + ": " + what);
                assertTrue(pending.startsWith("PENDING made " + requests + " failed 0"), pending);
                assertNotNull(full, attack + ": no request was refused naming maxPendingConnections, so the backlog "
                        + "never filled and the attack proves nothing: " + what);
                if (served > SERVED_WITHIN_MILLIS) {
                    late.add(attack + ": the client from another source took " + served + " ms (" + quietServedMillis
                            + " ms on the quiet lab)");
                }
                assertTrue(peaks.qps.get() - baseQps <= SMALL_BACKLOG + 2, attack + ": the small broker held "
                        + (peaks.qps.get() - baseQps) + " queue pairs, above maxPendingConnections and the client's");
                crossed.requireRoceCrossedTheWire(requests);
                release();
            } finally {
                StringBuilder del = new StringBuilder();
                for (String a : sources) {
                    del.append("ip addr del ").append(a).append("/24 dev ").append(LabHost.WIRE_NIC)
                            .append(" 2>/dev/null; ");
                }
                LabHost.b().sh(del + "true");
            }
        }
        attacked.afterAttack(attack, requests + " unfinished requests from " + aliases
                + " IPv4 aliases to a second broker, its backlog full and another source served");
    }

    /** Host A's CPU time so far (this JVM runs on A): busy (user, nice, system, irq, softirq) and idle ticks. */
    /**
     * How host A's CPUs were spent between two {@link CpuUse#now} readings: the client on A shares them with the
     * broker and with rxe, which handles every packet of B's flood in A's kernel (on a NIC it would not).
     */
    private record CpuUse(long[] kinds, Map<String, Long> byProcess) {

        /** /proc/stat's first line: user+nice, system, irq+softirq, idle+iowait; and each process's utime+stime. */
        static CpuUse now() throws Exception {
            String[] f = Files.readAllLines(Path.of("/proc/stat")).get(0).trim().split("\\s+");
            long[] kinds = {Long.parseLong(f[1]) + Long.parseLong(f[2]), Long.parseLong(f[3]),
                    Long.parseLong(f[6]) + Long.parseLong(f[7]), Long.parseLong(f[4]) + Long.parseLong(f[5])};
            Map<String, Long> byProcess = new HashMap<>();
            try (DirectoryStream<Path> procs = Files.newDirectoryStream(Path.of("/proc"), "[0-9]*")) {
                for (Path proc : procs) {
                    String stat;
                    try {
                        stat = Files.readString(proc.resolve("stat"));
                    } catch (IOException gone) {
                        continue;
                    }
                    int close = stat.lastIndexOf(')');
                    String[] rest = stat.substring(close + 2).split(" ");
                    // after the name: state(0) ... utime(11) stime(12), as proc(5) numbers them 14 and 15
                    String name = stat.substring(stat.indexOf('(') + 1, close) + "/" + proc.getFileName();
                    byProcess.put(name, Long.parseLong(rest[11]) + Long.parseLong(rest[12]));
                }
            }
            return new CpuUse(kinds, byProcess);
        }

        /** E.g. "95 % busy (user 40, system 30, irq 25); most: java/312 60 %, ksoftirqd/0/12 20 %". */
        String since(CpuUse from) {
            long[] d = new long[4];
            for (int i = 0; i < 4; i++) {
                d[i] = kinds[i] - from.kinds[i];
            }
            long all = d[0] + d[1] + d[2] + d[3];
            if (all == 0) {
                return "not measured";
            }
            String top = byProcess.entrySet().stream()
                    .map(e -> Map.entry(e.getKey(), e.getValue() - from.byProcess.getOrDefault(e.getKey(), 0L)))
                    .filter(e -> e.getValue() > 0).sorted(Map.Entry.<String, Long>comparingByValue().reversed())
                    .limit(5).map(e -> e.getKey() + " " + (100 * e.getValue() / all) + " %")
                    .collect(Collectors.joining(", "));
            return (100 * (all - d[3]) / all) + " % busy (user " + 100 * d[0] / all + ", system " + 100 * d[1] / all
                    + ", irq " + 100 * d[2] / all + "); most: " + top;
        }
    }

    /** Adds {@code sources} to B's wire0 (no duplicate detection: usable at once) and waits for rxe's GIDs. */
    private static String addAddresses(List<String> sources) throws Exception {
        StringBuilder s = new StringBuilder();
        for (String a : sources) {
            s.append("ip -6 addr add ").append(a).append("/64 dev ").append(LabHost.WIRE_NIC)
                    .append(" nodad || exit 1; ");
        }
        // every address of the NIC is a GID of rxe (two: RoCE v1 and v2): the requests go out with it
        s.append("n=0; for t in $(seq 100); do n=$(cat /sys/class/infiniband/").append(LabHost.RDMA_DEVICE)
                .append("/ports/1/gids/* 2>/dev/null | grep -c '^fd78:0000:0000:0000:0000:0000:000b:'); ")
                .append("[ \"$n\" -ge ").append(sources.size()).append(" ] && break; sleep 0.1; done; ")
                .append("echo \"$n GIDs\"");
        return LabHost.b().sh(s.toString()).strip() + " for " + sources.size() + " addresses";
    }

    private static void removeAddresses(List<String> sources) throws Exception {
        StringBuilder s = new StringBuilder();
        for (String a : sources) {
            s.append("ip -6 addr del ").append(a).append("/64 dev ").append(LabHost.WIRE_NIC).append(" 2>/dev/null; ");
        }
        LabHost.b().sh(s + "true");
    }

    // ---------------------------------------------------------------------------------------------- hole 4

    /**
     * B drops its own CM disconnect messages (DREQ and DREP: UDP 4791, BTH destination QP 1, MAD attribute 0x15 and
     * 0x16) on wire0's egress, then its peers, in batches of 32, each connect, each send a fragment without a first
     * one (a protocol error the broker closes the connection for) and each wait for the broker's DREQ, until the
     * broker refuses one or 88 were admitted. The broker's DREQs go unanswered. rdma_destroy_id cancels a DREQ that
     * waits for its reply, but not one still queued to be sent, which then runs its retries (about 66 s, as CI's
     * churn test once logged) before the destroy returns; a batch's DREQs leave together to reach that. Where the
     * kernel holds the ids, DestroyBacklog counts them against B and refuses B once 64 wait. Meanwhile the client is
     * served within 2 s. Then the filter goes and the kernel objects come back to the baseline within
     * {@value #DRAIN_SECONDS} s.
     */
    private void cmMessagesDropped() throws Exception {
        String attack = "hole 4: CM messages dropped after a provoked disconnect";
        int baseIds = attacked.baseline().counts().get("cm_id");
        WireCounters before = LabHost.b().counters();
        int mark = broker.outputMark();
        String dropped;
        long served;
        KernelRdmaObjects held;
        long tcDropped;
        long filteredAt;
        LabHost.b().sh("modprobe -a sch_ingress cls_u32 act_gact 2>/dev/null; tc qdisc add dev " + LabHost.WIRE_NIC
                + " clsact && for attr in 0x0015 0x0016; do tc filter add dev " + LabHost.WIRE_NIC + " egress protocol "
                + "ip prio 1 u32 match u8 17 0xff at 9 match u16 4791 0xffff at 22 match u32 0x00000001 0x00ffffff "
                + "at 32 match u16 $attr 0xffff at 64 action drop || exit 1; done");
        try {
            filteredAt = System.nanoTime();
            attacker.send("drop " + hostA4 + " " + port + " " + (DESTROYS_PER_SOURCE + 24));
            dropped = attacker.await("DROP", 300);
            held = KernelRdmaObjects.now();
            long t0 = System.nanoTime();
            attacked.wellBehavedClientIsServed(attack + " (while held)");
            served = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            attacked.checkBounds(attack + " (while held)", broker.heap());
            tcDropped = tcDropped(LabHost.b().sh("tc -s filter show dev " + LabHost.WIRE_NIC + " egress"));
        } finally {
            LabHost.b().sh("tc qdisc del dev " + LabHost.WIRE_NIC + " clsact 2>/dev/null; true");
        }
        long heldSeconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - filteredAt);
        long unfiltered = System.nanoTime();
        KernelRdmaObjects drained = KernelRdmaObjects.now();
        while (drained.counts().get("cm_id") > baseIds
                && System.nanoTime() - unfiltered < TimeUnit.SECONDS.toNanos(DRAIN_SECONDS)) {
            Thread.sleep(500);
            drained = KernelRdmaObjects.now();
        }
        long drainMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - unfiltered);
        WireCounters crossed = LabHost.b().counters().since(before);
        List<Long> destroys = destroyMillis(broker.linesSince(mark));
        Matcher m = Pattern.compile("DROP admitted (\\d+) refused (\\d+)").matcher(dropped);
        assertTrue(m.find(), dropped);
        int admitted = Integer.parseInt(m.group(1));
        String what = "B: " + dropped + "; B's filter dropped " + tcDropped + " DREQ/DREP MADs (rxe sent "
                + crossed.rxe("sent_pkts") + ", NIC tx " + crossed.nic("tx_packets") + " packets); the kernel's cm_ids "
                + "on A while held " + held.counts().get("cm_id") + " (baseline " + baseIds + "), registered "
                + AttackedBroker.mib(held.foreignRegisteredBytes()) + "; the client served in " + served + " ms; the "
                + "filter held " + heldSeconds + " s, then the cm_ids were back to " + drained.counts().get("cm_id")
                + " in " + drainMillis + " ms; slow rdma_destroy_id logged (ms): " + destroys;
        System.out.println("figure: " + attack + ": " + what);
        attacked.notePeakRegistered(held.foreignRegisteredBytes());
        assertTrue(crossed.nic("tx_packets") + tcDropped + 32 >= crossed.rxe("sent_pkts"), attack + ": B's NIC "
                + "sent fewer packets than rxe less what the filter dropped: " + crossed.summary());
        crossed.requireRoceCrossedTheWire(admitted, 0.9);
        int heldIds = held.counts().get("cm_id") - baseIds;
        // whether the kernel holds the ids at all is the kernel's choice: on 6.1's rxe, rdma_destroy_id cancels a
        // DREQ that waits for its reply and returns, so in every run so far none was held and B was never refused
        // (what makes a destroy wait, a DREQ still queued to be sent when its id is destroyed, was not reached even
        // with a batch's 32 DREQs at once). Whatever the kernel holds, the broker must bound it per source
        System.out.println("figure: " + attack + ": " + (heldIds > 0 || !destroys.isEmpty() ? "the kernel held "
                + heldIds + " closed connections' cm_ids" : "not reproduced: the kernel held no cm_id (its destroys "
                + "cancel the unanswered DREQs), so DestroyBacklog had nothing to bound"));
        assertTrue(heldIds <= DESTROYS_PER_SOURCE + 4, attack + ": " + what);
        if (heldIds >= DESTROYS_PER_SOURCE) {
            assertTrue(dropped.contains("await destroy"), attack + ": the kernel held " + heldIds + " ids and the "
                    + "broker did not refuse B for its closed connections' ids awaiting destroy: " + what);
        }
        assertTrue(admitted <= DESTROYS_PER_SOURCE + 2 || heldIds < DESTROYS_PER_SOURCE, attack + ": B had "
                + admitted + " connections admitted, above DestroyBacklog.MAX_PER_SOURCE " + DESTROYS_PER_SOURCE
                + " while the kernel held " + heldIds + " ids");
        assertTrue(served <= SERVED_WITHIN_MILLIS, attack + ": the client took " + served + " ms: " + what);
        assertEquals(baseIds, drained.counts().get("cm_id"), attack + ": the kernel still holds cm_ids "
                + DRAIN_SECONDS + " s after B answered again: " + what);
        release();
        attacked.afterAttack(attack, what);
    }

    /** Packets the tc filters' drop actions counted ({@code tc -s filter show}: "Sent N bytes M pkt (dropped D,"). */
    static long tcDropped(String tcStats) {
        long sum = 0;
        Matcher m = Pattern.compile("\\(dropped (\\d+),").matcher(tcStats);
        while (m.find()) {
            sum += Long.parseLong(m.group(1));
        }
        return sum;
    }

    /** The times of the broker's "rdma_destroy_id of ... took N ms" lines. */
    private static List<Long> destroyMillis(List<String> lines) {
        List<Long> ms = new ArrayList<>();
        Pattern p = Pattern.compile("rdma_destroy_id of .* took (\\d+) ms");
        for (String l : lines) {
            Matcher m = p.matcher(l);
            if (m.find()) {
                ms.add(Long.parseLong(m.group(1)));
            }
        }
        return ms;
    }

    // --------------------------------------------------------------------------------------------- helpers

    /** B destroys what the last attack opened. */
    private void release() throws InterruptedException {
        attacker.send("release");
        String released = attacker.await("RELEASED", 200);
        assertTrue(released.contains("and every flood"), released);
    }

    /** How much the broker counter {@code key} grew from {@code before} to {@code after}. */
    private static long grew(Map<String, Long> before, Map<String, Long> after, String key) {
        return after.get(key) - before.get(key);
    }

    /**
     * Waits (at most 60 s) until the broker has accepted or refused {@code requests} more requests than at
     * {@code before}, and returns the milliseconds since {@code start}: the window in which it admitted them.
     */
    private long untilEveryRequestAnswered(Map<String, Long> before, int requests, long start) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() < deadline) {
            Map<String, Long> now = broker.stats();
            if (grew(before, now, "connectionsAccepted") + grew(before, now, "connectionsRefused") >= requests) {
                break;
            }
            Thread.sleep(200);
        }
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    }

    /**
     * The broker's queue pairs (the kernel's objects that no live thread of this JVM made) and registered bytes, the
     * highest seen, sampled every second (rdma resource show runs five processes: lightly, on 2 vCPUs) on a thread
     * of its own until {@link #stop}.
     */
    private record Peaks(AtomicInteger qps, AtomicLong registered, AtomicBoolean running, ExecutorService sampler,
                         Future<?> done) {

        static Peaks start() {
            AtomicInteger qps = new AtomicInteger();
            AtomicLong registered = new AtomicLong();
            AtomicBoolean running = new AtomicBoolean(true);
            ExecutorService sampler = Executors.newSingleThreadExecutor();
            Future<?> done = sampler.submit(() -> {
                while (running.get()) {
                    KernelRdmaObjects now = KernelRdmaObjects.now();
                    qps.accumulateAndGet(now.foreign("qp"), Math::max);
                    registered.accumulateAndGet(now.foreignRegisteredBytes(), Math::max);
                    Thread.sleep(1_000);
                }
                return null;
            });
            return new Peaks(qps, registered, running, sampler, done);
        }

        void stop() throws Exception {
            running.set(false);
            try {
                done.get(30, TimeUnit.SECONDS);
            } finally {
                sampler.shutdownNow();
            }
        }
    }
}
