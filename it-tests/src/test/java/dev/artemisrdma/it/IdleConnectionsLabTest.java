package dev.artemisrdma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.stats.LoopStats;
import dev.artemisrdma.transport.stats.TransportStats;
import dev.artemisrdma.transport.verbs.VerbsFabric;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@value #CONNECTIONS} connections to one RdmaTransport listener on the real rxe devices, each exchanging a frame,
 * then idle, then a trickle (one frame each way on one connection at a time, as pings are): prints what the
 * completion loops cost (thread CPU, wake-ups, spins; {@link LoopStats}). Asserts only facts that do not depend on
 * the machine's speed: every connection established and echoed, no RNR on rxe's hardware counters nor in our
 * counters, and every kernel object back once closed. The 1,000-connection broker figures are
 * {@code it-tests/bench/scale-bench}'s.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class IdleConnectionsLabTest {

    private static final int CONNECTIONS = 150;
    private static final long WINDOW_SECONDS = 10;

    /** Echoes every frame back. */
    private static final class Echo implements ChannelHandler {
        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            byte[] copy = new byte[frame.remaining()];
            frame.get(copy);
            try {
                channel.write(ByteBuffer.wrap(copy), true);
            } catch (FabricException e) {
                throw new IllegalStateException(e);
            }
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
        }
    }

    /** Counts the echoes that came back. */
    private static final class Counter implements ChannelHandler {
        final AtomicInteger frames;

        Counter(AtomicInteger frames) {
            this.frames = frames;
        }

        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            frames.incrementAndGet();
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
        }
    }

    @Test
    void manyIdleConnectionsCostTheLoopsLittleAndLeaveNothingBehind() throws Exception {
        RdmaResources before = RdmaResources.afterWarmUp();
        Map<String, Long> rnrBefore = rnrCounters();
        // the broker's defaults (receive slots, slot size, busyPollMicros 50)
        TransportConfig config = TransportConfig.defaults();
        AtomicInteger echoes = new AtomicInteger();
        ConcurrentLinkedQueue<RdmaChannel> accepted = new ConcurrentLinkedQueue<>();
        try (VerbsFabric fabric = new VerbsFabric();
             RdmaTransport serverTransport = RdmaTransport.create(fabric, config);
             RdmaTransport clientTransport = RdmaTransport.create(fabric, config)) {
            RdmaServer server = serverTransport.listen(Lab.address(Lab.addr1(), Lab.freshPort()), ch -> {
                accepted.add(ch);
                return new Echo();
            });
            List<RdmaChannel> clients = new ArrayList<>();
            long start = System.nanoTime();
            for (int i = 0; i < CONNECTIONS; i++) {
                RdmaChannel ch = clientTransport.connect(server.localAddress(), new Counter(echoes));
                ch.write(ByteBuffer.wrap(new byte[] {(byte) i}), true);
                clients.add(ch);
            }
            await("every connection's echo", () -> echoes.get() == CONNECTIONS);
            System.out.printf(Locale.ROOT, "%d connections opened and echoed in %d ms (%d completion loops at the "
                    + "server)%n", CONNECTIONS, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start),
                    serverTransport.loopStats().loops());
            assertEquals(CONNECTIONS, serverTransport.channelCount(), "connections at the server");
            assertEquals(CONNECTIONS, clientTransport.channelCount(), "connections at the client");

            Thread.sleep(2000); // the loops settle into blocking
            window("idle", serverTransport, clientTransport, () -> { });

            AtomicInteger next = new AtomicInteger();
            int echoesBefore = echoes.get();
            // one connection after another, 15 frames a second in all: Artemis pings 1,000 connections about as often
            window("trickle", serverTransport, clientTransport, () -> {
                RdmaChannel ch = clients.get(next.getAndIncrement() % CONNECTIONS);
                try {
                    ch.write(ByteBuffer.wrap(new byte[] {1}), true);
                } catch (FabricException e) {
                    throw new IllegalStateException(e);
                }
            });
            int sent = next.get();
            await("the trickle's echoes", () -> echoes.get() == echoesBefore + sent);

            long closed = 0;
            for (RdmaChannel ch : clients) {
                closed += ch.isOpen() ? 0 : 1;
            }
            assertEquals(0, closed, "connections closed during the test");
            for (RdmaChannel ch : accepted) {
                TransportStats s = ch.stats();
                assertTrue(s.framesReceived() >= 1, "a server channel received nothing: " + s);
            }
            for (RdmaChannel ch : clients) {
                ch.close();
            }
            server.close();
        }
        Map<String, Long> rnrAfter = rnrCounters();
        System.out.println("rxe RNR counters before " + rnrBefore + ", after " + rnrAfter);
        assertTrue(!rnrBefore.isEmpty(), "rxe exposes no rnr counters in hw_counters");
        assertEquals(rnrBefore, rnrAfter, "RNR on rxe's hardware counters");
        RdmaResources after = RdmaResources.awaitEqual(before, 30_000);
        assertEquals(before, after, "rdma resource show counts after closing " + CONNECTIONS + " connections");
    }

    /** Runs {@code each} 15 times a second for the window and prints what the loops of both sides did. */
    private static void window(String name, RdmaTransport server, RdmaTransport client, Runnable each)
            throws InterruptedException {
        LoopStats s0 = server.loopStats();
        LoopStats c0 = client.loopStats();
        long start = System.nanoTime();
        long end = start + TimeUnit.SECONDS.toNanos(WINDOW_SECONDS);
        long next = start;
        while (System.nanoTime() < end) {
            each.run();
            next += TimeUnit.SECONDS.toNanos(1) / 15;
            long wait = next - System.nanoTime();
            if (wait > 0) {
                TimeUnit.NANOSECONDS.sleep(wait);
            }
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        print(name, "server", server.loopStats(), s0, seconds);
        print(name, "client", client.loopStats(), c0, seconds);
    }

    private static void print(String window, String side, LoopStats now, LoopStats before, double seconds) {
        System.out.printf(Locale.ROOT, "%s, %d connections, %s loops (%d): CPU %.3f %% of one core, %.1f wake-ups/s, "
                + "%.1f blocks/s, %.1f spins/s (%d caught), spinning %.3f %% of one core%n", window, CONNECTIONS,
                side, now.loops(), (now.cpuNanos() - before.cpuNanos()) / 1e9 / seconds * 100,
                (now.wakeUps() - before.wakeUps()) / seconds, (now.blocks() - before.blocks()) / seconds,
                (now.spins() - before.spins()) / seconds, now.spinHits() - before.spinHits(),
                (now.spinNanos() - before.spinNanos()) / 1e9 / seconds * 100);
    }

    private static void await(String what, java.util.function.BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.sleep(10);
        }
    }

    /** rxe's RNR counters (names containing "rnr"), summed over devices and ports. */
    static Map<String, Long> rnrCounters() throws IOException {
        return RxeHwCounters.now().rnr();
    }
}
