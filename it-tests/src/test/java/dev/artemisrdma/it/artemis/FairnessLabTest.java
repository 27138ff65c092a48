package dev.artemisrdma.it.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.AtomicLong;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.Lab;
import dev.artemisrdma.it.RxeHwCounters;
import dev.artemisrdma.transport.wire.FrameHeader;
import dev.artemisrdma.transport.wire.Handshake;
import dev.artemisrdma.verbs.RdmaDevices;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import jakarta.jms.TemporaryQueue;
import jakarta.jms.TextMessage;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 23's fairness scenarios on the real rxe fabric: a broker in its own JVM ({@code -Xmx1g}) with the acceptor's
 * defaults, listening on every address; raw verbs peers ({@link RawVerbsPeer}, {@link HalfOpenFlood}: not our
 * transport) take what a shared resource offers, and well-behaved JMS clients must still be served. Each scenario ends
 * with {@link AttackedBroker}'s checks (a client served over RDMA, heap after GC and registered memory within bounds,
 * the kernel's RDMA objects back to the baseline) and counts the lines the attack made the broker log.
 *
 * <p>Addresses: the attackers of the shared pool and the well-behaved clients go to rxe1's address (one device, so
 * they share its completion loops' pools); the connection flood goes to rxe0's, so it comes from another source
 * address than the client that must be admitted while it lasts.
 */
@Timeout(value = 900, unit = TimeUnit.SECONDS)
class FairnessLabTest {

    private static final long MAX_REGISTERED = 1L << 30; // maxRegisteredMemory's default
    private static final long REASSEMBLY_MEMORY = 256L << 20; // reassemblyMemory's default
    private static final int PENDING_PER_SOURCE = 64; // maxPendingConnectionsPerSource's default
    private static final int LARGE_MESSAGES = Integer.getInteger("fairness.largeMessages", 200);
    /**
     * Lines one kind of peer-triggered event may cost the log: 10 per 10 s, then one summary (docs/limits.md, "Log
     * lines and waits"). An attack of N s may write at most this many per kind per started 10 s, plus the window it
     * began in.
     */
    private static final int LINES_PER_KIND_PER_WINDOW = 11;
    /**
     * Kinds of line an attack here may make the broker write: the refusal or failure it causes, the closes and losses
     * of the connections, the old-peer notices of a raw peer's connection (packing, its own receive queue).
     */
    private static final int KINDS = 4;

    private HostileBroker broker;
    private AttackedBroker attacked;
    private RdmaDevices devices;
    private ActiveMQConnectionFactory client;
    private int port;
    private final String pooled = Lab.addr1();

    @Test
    void noPeerTakesMoreThanItsShareAndWellBehavedClientsAreServed() throws Exception {
        port = Lab.freshPort();
        try (HostileBroker b = HostileBroker.start("0.0.0.0", port, Files.createTempDirectory("fairness"),
                "sharedReceiveQueue=true");
             RdmaDevices d = RdmaDevices.open();
             ActiveMQConnectionFactory cf = RdmaConnectionFactories.create("rdma://" + pooled + ":" + port
                     + "?reconnectAttempts=0")) {
            broker = b;
            devices = d;
            client = cf;
            attacked = new AttackedBroker(b, cf, MAX_REGISTERED);
            try {
                attacked.wellBehavedClientIsServed("warm-up");
                // and through rxe0, where the flood goes: the broker's transport opens a device (its protection
                // domain, a completion loop) with the first connection on it, and keeps it
                try (ActiveMQConnectionFactory other = RdmaConnectionFactories.create("rdma://" + Lab.addr0() + ":"
                        + port + "?reconnectAttempts=0")) {
                    attacked.wellBehavedClientIsServed("warm-up on rxe0", other);
                }
                attacked.baseline(REASSEMBLY_MEMORY);
                attacked.compareRegionsAtTheEnd(); // the slab trim's minute once, not after each attack

                creditHogs();
                creditViolatorAmongStreams();
                reassemblySquatters();
                connectionFlood();
                stuckReader();
                attacked.regionsBack("memory regions after the five attacks");

                Map<String, Long> end = broker.heap();
                attacked.figure("end", "heap after GC " + AttackedBroker.mib(end.get("heapAfterGc"))
                        + "; protocol errors " + end.get("protocolErrors") + ", refused "
                        + end.get("connectionsRefused") + ", accepted " + end.get("connectionsAccepted"));
            } finally {
                attacked.printSummary("FairnessLabTest", "the acceptor's defaults");
            }
        }
    }

    // ---------------------------------------------------------------------------------------------- scenarios

    /**
     * 200 peers that state credit growth but not recall spend every credit on frames asking for more, and keep what
     * they are given; then 50 JMS clients connect and each completes a request/reply within 10 s. No SEND met an empty
     * receive queue: rxe's RNR counters did not move.
     */
    private void creditHogs() throws Exception {
        Mark started = begin();
        RxeHwCounters before = RxeHwCounters.now();
        List<RawVerbsPeer> hogs = new ArrayList<>();
        int granted = 0;
        try {
            for (int i = 0; i < 200; i++) {
                RawVerbsPeer hog = RawVerbsPeer.open(devices, pooled, port);
                hogs.add(hog);
                hog.connect(RawVerbsPeer.growthWithoutRecallHandshake());
                granted += hog.server().initialCredits();
            }
            int held = 0;
            for (int round = 0; round < 3; round++) {
                held = 0;
                for (RawVerbsPeer hog : hogs) {
                    held += hog.spendAskingForMore(round == 2 ? 5 : 0);
                }
            }
            attacked.figure("credit hogs (while held)", hogs.size() + " hogs, initial credits " + granted
                    + ", credits held after three rounds of asking for more on every frame " + held);
            List<Long> millis = requestReplies(50, 10);
            long lostHogs = 0;
            for (RawVerbsPeer hog : hogs) {
                lostHogs += hog.lostNow() ? 1 : 0;
            }
            Map<String, Long> rnr = RxeHwCounters.now().since(before).rnr();
            attacked.figure("credit hogs: 50 request/replies", "slowest " + Collections.max(millis) + " ms, median "
                    + median(millis) + " ms; hogs the broker closed " + lostHogs + "; rxe RNR counters moved " + rnr);
            rnr.forEach((name, moved) -> assertEquals(0L, moved, "rxe counter " + name + " moved: a SEND met an "
                    + "empty receive queue while the hogs held the pool"));
        } finally {
            hogs.forEach(RawVerbsPeer::close);
        }
        end("credit hogs", started, "200 hogs, then 50 clients served within 10 s each");
    }

    /**
     * 20 JMS connections stream with {@code rnrRetryCount=0} (a SEND that met an empty shared queue would fail its
     * connection at once) while a peer that states every feature sends ten times its credits in one burst: only the
     * violator fails.
     */
    private void creditViolatorAmongStreams() throws Exception {
        Mark started = begin();
        int streams = 20;
        int messages = 1_000;
        ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
        CountDownLatch streaming = new CountDownLatch(streams);
        AtomicLong sent = new AtomicLong();
        ExecutorService pool = Executors.newFixedThreadPool(streams);
        RawVerbsPeer violator = RawVerbsPeer.open(devices, pooled, port);
        try (ActiveMQConnectionFactory strict = RdmaConnectionFactories.create("rdma://" + pooled + ":" + port
                + "?reconnectAttempts=0&rnrRetryCount=0")) {
            violator.connect(Handshake.encodeConnect(new Handshake.Params(RawVerbsPeer.SLOT, RawVerbsPeer.RECEIVES,
                    4096, Handshake.FEATURE_CREDIT_GROWTH | Handshake.FEATURE_CREDIT_RECALL, RawVerbsPeer.RECEIVES)));
            List<Future<?>> done = new ArrayList<>();
            for (int s = 0; s < streams; s++) {
                int stream = s;
                done.add(pool.submit(() -> {
                    try (Connection connection = strict.createConnection()) {
                        connection.setExceptionListener(e -> failures.add("stream " + stream + ": " + e));
                        Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
                        MessageProducer producer = session.createProducer(session.createQueue("fair.stream"));
                        producer.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
                        byte[] body = new byte[512];
                        for (int i = 0; i < messages; i++) {
                            BytesMessage m = session.createBytesMessage();
                            m.writeBytes(body);
                            producer.send(m);
                            sent.incrementAndGet();
                            if (i == 100) {
                                streaming.countDown();
                            }
                        }
                        session.createConsumer(session.createQueue("fair.stream")).close(); // a round trip: all in
                    } catch (Exception e) {
                        failures.add("stream " + stream + ": " + e);
                        streaming.countDown();
                    }
                    return null;
                }));
            }
            assertTrue(streaming.await(120, TimeUnit.SECONDS), "the 20 streams did not get going");
            int burst = 10 * violator.server().initialCredits();
            long sentAtBurst = sent.get();
            violator.burst(RawVerbsPeer.frame(FrameHeader.CREDIT, 0, 0, 0), burst);
            for (Future<?> f : done) {
                f.get(300, TimeUnit.SECONDS);
            }
            assertTrue(failures.isEmpty(), "well-behaved streams failed: " + failures);
            assertTrue(violator.awaitLost(20_000), "the broker did not close the violator's connection");
            String from = violator.localAddress();
            assertNotNull(broker.awaitLine(l -> l.contains(from)
                    && l.contains("would take receives of the shared pool"), 10_000),
                    "the broker logged no credit violation for " + from);
            attacked.figure("credit violator (while streaming)", burst + " SENDs on " + burst / 10 + " credits, "
                    + "burst at " + sentAtBurst + " of " + streams * messages + " messages streamed; only the "
                    + "violator failed");
        } finally {
            pool.shutdownNow();
            violator.close();
        }
        drain("fair.stream");
        end("credit violator", started, "20 streams with rnrRetryCount=0 unharmed");
    }

    /**
     * 4 peers each leave a frame of 32 MiB + 1 byte unfinished (all but its last fragment sent), holding reassembly
     * memory for the full reassemblyTimeout (30 s), while a well-behaved client sends {@value #LARGE_MESSAGES} JMS
     * messages of 1 MiB (Artemis large messages: chunks of about 100 KiB, each a fragmented frame that needs
     * reassembly room): all delivered, intact; only the squatters fail.
     */
    private void reassemblySquatters() throws Exception {
        Mark started = begin();
        int frame = (32 << 20) + 1;
        List<RawVerbsPeer> squatters = new ArrayList<>();
        try {
            for (int i = 0; i < 4; i++) {
                RawVerbsPeer p = RawVerbsPeer.open(devices, pooled, port);
                squatters.add(p);
                p.connect(RawVerbsPeer.honestHandshake());
            }
            int payload = squatters.get(0).fragmentPayload();
            for (RawVerbsPeer p : squatters) {
                p.fragment(true, false, frame, payload);
                for (int offset = payload; offset + payload < frame; offset += payload) {
                    p.fragment(false, false, offset, payload);
                }
            }
            long heldMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started.nanos());
            Map<String, Long> held = broker.heap();
            attacked.checkBounds("reassembly squatters (while held)", held);
            long t0 = System.nanoTime();
            attacked.largeMessagesServed("while 4 squatters hold 128 MiB of reassembly", LARGE_MESSAGES, 1 << 20);
            attacked.figure("reassembly squatters (served)", "4 frames of 32 MiB + 1 left unfinished in " + heldMillis
                    + " ms; " + LARGE_MESSAGES + " messages of 1 MiB served meanwhile in "
                    + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) + " ms");
            for (RawVerbsPeer p : squatters) {
                String from = p.localAddress();
                assertTrue(p.awaitLost(60_000), "the broker did not fail the squatter " + from);
                assertNotNull(broker.awaitLine(l -> l.contains(from) && (l.contains("reassemblyTimeout")
                        || l.contains("fair share")), 10_000), "the broker logged no reason for failing " + from);
            }
        } finally {
            squatters.forEach(RawVerbsPeer::close);
        }
        end("reassembly squatters", started, "4 squatters failed alone, " + LARGE_MESSAGES
                + " large messages delivered");
    }

    /**
     * 2,000 connection requests from one source address that never finish their handshake (no RTU), as fast as this
     * process makes them; while they come, a client from the other address connects and is served within 2 s, and
     * the broker holds at most maxPendingConnectionsPerSource of them (its queue pairs, counted by the kernel).
     */
    private void connectionFlood() throws Exception {
        Mark started = begin();
        String target = Lab.addr0();
        Map<String, Long> before = broker.stats();
        int baseQps = attacked.baseline().foreign("qp");
        AtomicInteger made = new AtomicInteger();
        AtomicInteger peakQps = new AtomicInteger();
        AtomicReference<KernelRdmaObjects> peak = new AtomicReference<>();
        ExecutorService flooder = Executors.newSingleThreadExecutor();
        try (HalfOpenFlood flood = new HalfOpenFlood(devices)) {
            // the flood on a thread of its own, which lives until the flood is destroyed: the kernel names an object's
            // owner by the thread that made it, and the broker's queue pairs are those no live thread of ours made
            Future<Long> flooding = flooder.submit(() -> {
                byte[] handshake = RawVerbsPeer.honestHandshake();
                for (int i = 0; i < 2_000; i++) {
                    flood.attempt(target, port, handshake);
                    made.incrementAndGet();
                    if (i % 250 == 249) {
                        KernelRdmaObjects now = KernelRdmaObjects.now();
                        if (now.foreign("qp") > peakQps.get()) {
                            peakQps.set(now.foreign("qp"));
                            peak.set(now);
                        }
                    }
                }
                return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started.nanos());
            });
            while (made.get() < 1_000 && !flooding.isDone()) {
                Thread.sleep(10);
            }
            int madeAtStart = made.get();
            long t0 = System.nanoTime();
            attacked.wellBehavedClientIsServed("connection flood (while flooding)");
            long served = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            int madeWhenServed = made.get();
            long floodMillis = flooding.get(600, TimeUnit.SECONDS);
            Map<String, Long> after = broker.stats();
            long refused = after.get("connectionsRefused") - before.get("connectionsRefused");
            // the broker's queue pairs by state and creating thread: what a count above the cap is made of
            Object atPeak = peak.get() == null ? "{}" : peak.get().foreignQueuePairs();
            attacked.figure("connection flood (while held)", "2,000 requests from " + flood.sourceHost() + " in "
                    + floodMillis + " ms; the broker's queue pairs at most " + peakQps.get() + " (baseline "
                    + baseQps + ", cap " + PENDING_PER_SOURCE + " per source; at the peak " + atPeak + "); refused "
                    + refused + "; a client from " + pooled + " served in " + served + " ms, during requests "
                    + madeAtStart + ".." + madeWhenServed);
            assertTrue(peakQps.get() <= baseQps + PENDING_PER_SOURCE + 1, "the broker held " + (peakQps.get()
                    - baseQps) + " queue pairs for the flood, above maxPendingConnectionsPerSource "
                    + PENDING_PER_SOURCE + " (and the client's connection); at the peak: " + atPeak);
            assertTrue(refused >= 2_000 - 4L * PENDING_PER_SOURCE, "the broker refused only " + refused
                    + " of 2,000 requests");
            assertTrue(served <= 2_000, "the client from the other address was served in " + served
                    + " ms, not within 2 s");
            assertTrue(flooder.submit(() -> flood.close(120)).get(150, TimeUnit.SECONDS),
                    "the flood's own ids were not destroyed within 120 s");
        } finally {
            flooder.shutdownNow();
        }
        // the broker releases what it accepted after handshakeTimeout (10 s)
        Thread.sleep(11_000);
        end("connection flood", started, "2,000 unfinished requests, at most the per-source cap held");
    }

    /**
     * A JMS consumer in its own process with an unbounded consumer window is stopped (SIGSTOP: its connection stays
     * up, the kernel still acknowledges, it grants no more credit) while the broker delivers 16 MiB to it; the
     * broker goes on serving others, and fails that connection once it stayed unwritable for unwritableTimeout (30 s).
     */
    private void stuckReader() throws Exception {
        Mark started = begin();
        JavaProcess reader = JavaProcess.main(ConnectedClientMain.class).name("stuck-reader")
                .jvm("-Xmx512m", "-XX:TieredStopAtLevel=1").readyWhen(ConnectedClientMain.READY, 180)
                .echo(line -> line.contains(" WARN ") || line.contains(" ERROR "))
                .start("rdma://" + pooled + ":" + port + "?reconnectAttempts=0&consumerWindowSize=-1", "fair.stuck");
        try {
            reader.signal("STOP");
            long stoppedAt = System.nanoTime();
            try (Connection connection = client.createConnection()) {
                Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageProducer producer = session.createProducer(session.createQueue("fair.stuck"));
                producer.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
                byte[] body = new byte[20 << 10];
                for (int i = 0; i < 800; i++) {
                    BytesMessage m = session.createBytesMessage();
                    m.writeBytes(body);
                    producer.send(m);
                }
            }
            attacked.wellBehavedClientIsServed("stuck reader (while stuck)");
            String line = broker.awaitLine(l -> l.contains("past unwritableTimeout"), 60_000);
            long failedAfter = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - stoppedAt);
            assertNotNull(line, "the broker did not fail the stuck reader's connection within 60 s of its stop");
            attacked.figure("stuck reader (while stuck)", "16 MiB for a stopped consumer; its connection failed "
                    + failedAfter + " ms after the stop: " + line.substring(Math.max(0, line.indexOf("channel"))));
            assertTrue(failedAfter < 50_000, "failed only " + failedAfter + " ms after the stop");
        } finally {
            reader.signal("CONT");
            reader.kill();
        }
        drain("fair.stuck");
        end("stuck reader", started, "a stopped consumer failed past unwritableTimeout, alone");
    }

    // ------------------------------------------------------------------------------------------------ helpers

    /**
     * {@code n} JMS clients, {@code parallel} at a time, each connects and completes a request/reply through the
     * broker (a responder on another connection answers to its temporary queue); each within 10 s. All stay connected
     * until the last is done. Returns each client's time, connect included.
     */
    private List<Long> requestReplies(int n, int parallel) throws Exception {
        List<Long> millis = Collections.synchronizedList(new ArrayList<>());
        List<Connection> open = Collections.synchronizedList(new ArrayList<>());
        ExecutorService pool = Executors.newFixedThreadPool(parallel);
        try (Connection responder = client.createConnection()) {
            Session rs = responder.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer replies = rs.createProducer(null);
            rs.createConsumer(rs.createQueue("fair.requests")).setMessageListener(request -> {
                try {
                    replies.send(request.getJMSReplyTo(), rs.createTextMessage("re: "
                            + ((TextMessage) request).getText()));
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            responder.start();
            List<Future<?>> done = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                int c = i;
                done.add(pool.submit(() -> {
                    long t0 = System.nanoTime();
                    Connection connection = client.createConnection();
                    open.add(connection);
                    connection.start();
                    Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
                    TemporaryQueue replyTo = session.createTemporaryQueue();
                    MessageConsumer consumer = session.createConsumer(replyTo);
                    TextMessage request = session.createTextMessage("request " + c);
                    request.setJMSReplyTo(replyTo);
                    session.createProducer(session.createQueue("fair.requests")).send(request);
                    Message reply = consumer.receive(10_000);
                    long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                    assertNotNull(reply, "client " + c + " got no reply within 10 s");
                    assertEquals("re: request " + c, ((TextMessage) reply).getText());
                    assertTrue(took <= 10_000, "client " + c + " took " + took + " ms");
                    millis.add(took);
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get(120, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
            for (Connection c : open) {
                c.close();
            }
        }
        for (int i = 0; i < n; i++) {
            attacked.countCheck();
        }
        return millis;
    }

    /** Takes whatever a scenario left in {@code queue}, so the next scenario's heap check starts clean. */
    private void drain(String queue) throws Exception {
        try (Connection connection = client.createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer consumer = session.createConsumer(session.createQueue(queue));
            while (consumer.receive(2_000) != null) {
                // taken
            }
        }
    }

    /** Where an attack began: the broker's output line count and the time. */
    private record Mark(int line, long nanos) {
    }

    private Mark begin() {
        return new Mark(broker.outputMark(), System.nanoTime());
    }

    /**
     * The attack that began at {@code mark} is over: the lines the broker wrote since are at most
     * {@link #LINES_PER_KIND_PER_WINDOW} per kind of event ({@link #KINDS}) for each 10 s it lasted and the window it
     * began in; then {@link AttackedBroker#afterAttack}'s checks.
     */
    private void end(String attack, Mark mark, String what) throws Exception {
        List<String> lines = broker.linesSince(mark.line());
        long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - mark.nanos());
        long bound = (long) LINES_PER_KIND_PER_WINDOW * KINDS * (seconds / 10 + 2);
        attacked.figure(attack + ": log", lines.size() + " lines in " + seconds + " s (bound " + bound + ")");
        assertTrue(lines.size() <= bound, attack + ": the broker wrote " + lines.size() + " lines in " + seconds
                + " s, above " + bound + "; the first: " + lines.subList(0, Math.min(20, lines.size())));
        attacked.afterAttack(attack, what);
    }

    private static long median(List<Long> values) {
        List<Long> sorted = new ArrayList<>(values);
        Collections.sort(sorted);
        return sorted.get(sorted.size() / 2);
    }
}
