package dev.artemisrdma.transport.loop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.Connection;
import dev.artemisrdma.transport.FakeFabric;
import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.TransportHooks;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.stats.LoopStats;

/**
 * The completion loop's spin/block policy on the fake fabric: what it did is read from its counters, never from a
 * clock, so nothing here depends on how fast the machine is.
 */
class CompletionLoopPolicyTest {

    private static TransportConfig.Builder config() {
        return TransportConfig.builder().receiveSlots(8).slotSize(512).sendQueueDepth(16).rnrRetryCount(0);
    }

    private static CompletionLoop onlyLoop(RdmaTransport transport, FakeFabric fabric) {
        List<CompletionLoop> loops = TransportHooks.loops(transport, fabric.device());
        assertEquals(1, loops.size());
        return loops.get(0);
    }

    @Test
    void anIdleLoopBlocksWithoutPeriodicWakeUpsAndNeverSpins() throws Exception {
        try (Connection c = new Connection(config().build(), config().build())) {
            CompletionLoop loop = onlyLoop(c.serverTransport, c.fabric);
            Peers.await("the idle loop blocked with no spin window", 10_000,
                    () -> loop.isBlocked() && loop.spinWindowNanos() == 0);
            // the first waits after the handshake may be the short ones (a deadline was running): let one pass
            Thread.sleep(300);
            LoopStats before = loop.stats();
            Thread.sleep(1500);
            LoopStats after = loop.stats();
            // no deadline runs on an idle open connection, so the loop waits for up to IDLE_AWAIT_MILLIS (10 s):
            // 1.5 s hold at most the one wait that was already running (none ended) or one that just began
            assertTrue(after.blocks() - before.blocks() <= 1, "an idle loop woke up periodically: " + before
                    + " -> " + after);
            assertEquals(before.spins(), after.spins(), "an idle loop spun: " + after);
            assertEquals(before.wakeUps(), after.wakeUps(), "no completion, yet a wake-up: " + after);
            assertTrue(loop.isBlocked());
        }
    }

    @Test
    void aCloseFromAnotherThreadWakesALoopBlockedWithoutATimeout() throws Exception {
        // on the shared receive pool the closing channel has no receives of its own to be flushed: no completion
        // comes to wake its loop, only the close itself (through wake()) can have the loop drain and release it
        TransportConfig shared = config().sharedReceiveQueue(true).sharedReceiveSlots(64).build();
        try (Connection c = new Connection(shared, config().build())) {
            CompletionLoop loop = onlyLoop(c.serverTransport, c.fabric);
            assertTrue(loop.sharedPool() != null, "the accepted channel is on the shared pool");
            Thread.sleep(300); // past the handshake's short waits: the loop now blocks for IDLE_AWAIT_MILLIS
            Peers.await("the idle loop blocked", 10_000, loop::isBlocked);
            long start = System.nanoTime();
            c.serverChannel.forceClose();
            Peers.await("the server side released", 10_000, () -> !c.serverChannel.isOpen()
                    && c.serverTransport.loopStats().loops() == 1 && loop.load() == 0);
            long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertTrue(millis < CompletionLoop.IDLE_AWAIT_MILLIS / 2, "the close waited for the idle bound ("
                    + millis + " ms): the loop was not woken");
        }
    }

    @Test
    void aCompletionThatArrivesWhileTheLoopIsBlockedWakesItAtOnce() throws Exception {
        // busyPollMicros 0: the loop never spins, so only the completion channel can bring the frame in
        try (Connection c = new Connection(config().busyPollMicros(0).build(), config().build())) {
            CompletionLoop loop = onlyLoop(c.serverTransport, c.fabric);
            for (int i = 0; i < 20; i++) {
                Peers.await("the server's loop blocked", 10_000, loop::isBlocked);
                long wakeUps = loop.stats().wakeUps();
                c.client.write(ByteBuffer.wrap(Peers.payload(7, i, 100)), true);
                int expected = i + 1;
                Peers.await("frame " + i, 10_000, () -> c.serverSide.count() == expected);
                assertTrue(loop.stats().wakeUps() > wakeUps,
                        "the frame's completion woke the blocked loop (a timeout is not counted as a wake-up)");
            }
            LoopStats s = loop.stats();
            assertEquals(0, s.spins(), "busyPollMicros=0 spins never: " + s);
        }
    }

    @Test
    void busyPollModeOffNeverSpinsAndFixedSpinsTheWholeBoundAfterEveryCompletion() throws Exception {
        for (TransportConfig.BusyPollMode mode : new TransportConfig.BusyPollMode[] {
                TransportConfig.BusyPollMode.OFF, TransportConfig.BusyPollMode.FIXED}) {
            TransportConfig server = config().busyPollMicros(50).busyPollMode(mode).build();
            try (Connection c = new Connection(server, config().build())) {
                CompletionLoop loop = onlyLoop(c.serverTransport, c.fabric);
                long expectedWindow = mode == TransportConfig.BusyPollMode.FIXED ? 50_000 : 0;
                assertEquals(expectedWindow, loop.spinWindowNanos(), mode + ": the window");
                Peers.await(mode + ": the server's loop blocked", 10_000, loop::isBlocked);
                long spins = loop.stats().spins();
                for (int i = 0; i < 20; i++) {
                    Peers.await(mode + ": the server's loop blocked", 10_000, loop::isBlocked);
                    c.client.write(ByteBuffer.wrap(Peers.payload(5, i, 100)), true);
                    int expected = i + 1;
                    Peers.await(mode + ": frame " + i, 10_000, () -> c.serverSide.count() == expected);
                }
                Peers.await(mode + ": the server's loop blocked", 10_000, loop::isBlocked);
                LoopStats st = loop.stats();
                if (mode == TransportConfig.BusyPollMode.OFF) {
                    assertEquals(0, st.spins(), "busyPollMode=off spins never: " + st);
                } else {
                    assertTrue(st.spins() - spins >= 20, "busyPollMode=fixed spins after every frame: " + st);
                    assertEquals(expectedWindow, loop.spinWindowNanos(), "and never adapts");
                }
            }
        }
    }

    @Test
    void aSteadyExchangeMakesTheLoopSpinAndTheSpinsFindCompletions() throws Exception {
        // a bound far above any gap between two completions of an in-memory ping-pong: spinning always pays
        TransportConfig spinning = config().busyPollMicros(200_000).build();
        FakeFabric fabric = new FakeFabric();
        Semaphore echoed = new Semaphore(0);
        try (RdmaTransport server = RdmaTransport.create(fabric, spinning);
             RdmaTransport client = RdmaTransport.create(fabric, spinning)) {
            RdmaServer s = server.listen(Peers.serverAddress(), ch -> new Echo());
            RdmaChannel ch = client.connect(s.localAddress(), new Peers.Recorder() {
                @Override
                public void onFrame(RdmaChannel channel, ByteBuffer frame) {
                    echoed.release();
                }
            });
            for (int i = 0; i < 2000; i++) {
                ch.write(ByteBuffer.wrap(Peers.payload(3, i, 64)), true);
                assertTrue(echoed.tryAcquire(10, TimeUnit.SECONDS), "echo " + i);
            }
            LoopStats st = onlyLoop(server, fabric).stats();
            assertTrue(st.spins() > 0 && st.spinHits() > 0, "a loop under steady load spins and catches: " + st);
            assertTrue(st.spinNanos() > 0);
            assertTrue(server.loopStats().spinHits() >= st.spinHits());
            assertEquals(1, server.loopStats().loops());
        }
        assertEquals(0, fabric.liveCompletionQueues());
        fabric.assertNoViolations();
        fabric.close();
    }

    /** Writes every frame back, from the loop thread, as a broker answers. */
    private static final class Echo extends Peers.Recorder {
        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            try {
                channel.write(ByteBuffer.wrap(copy(frame)), true);
            } catch (FabricException e) {
                throw new IllegalStateException(e);
            }
        }

        private static byte[] copy(ByteBuffer frame) {
            byte[] b = new byte[frame.remaining()];
            frame.duplicate().get(b);
            return b;
        }
    }
}
