package dev.artemisrdma.transport.flow;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.FakeFabric;
import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.RawPeer;
import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.wire.FrameHeader;
import dev.artemisrdma.transport.wire.Handshake;

/**
 * The shared pool's fair-share rules against peers that do not cooperate (issue 23, items 1 and 3), one test per
 * rule, each on a FakeFabric with rnrRetryCount 0 (a SEND that meets an empty shared queue is a recorded violation):
 * no growth for a peer the pool cannot recall, no growth on a credit frame's hint, growth never into the reserve kept
 * for newcomers, a window kept through recalls failed (the holder, not the newcomer), a window that spends shrunk to
 * its fair share however often it asks for more, and a peer that sends beyond its credits stopped at its first extra
 * SEND, before it drains the queue the others' credits are promised from.
 */
class SharedPoolFairShareTest {

    private static TransportConfig.Builder base() {
        return TransportConfig.builder().rnrRetryCount(0).busyPollMicros(0).receiveSlots(16).slotSize(512)
                .sendQueueDepth(32).maxCompletionLoops(1);
    }

    /** A raw peer's handshake stating credit growth and, with {@code recall}, that it answers recalls. */
    static byte[] grows(boolean recall) {
        return Handshake.encodeConnect(new Handshake.Params(RawPeer.SLOT, RawPeer.RECEIVES, 64 << 20,
                Handshake.FEATURE_CREDIT_GROWTH | (recall ? Handshake.FEATURE_CREDIT_RECALL : 0), RawPeer.RECEIVES));
    }

    /** {@code peer} asks for more on every frame until {@code pool} has promised {@code committed} (100 frames at most). */
    static void growTo(RawPeer peer, SharedReceivePool pool, int committed) throws Exception {
        for (int f = 0; f < 100 && pool.committed() < committed; f++) {
            // one request at a time, each seen by the pool before the next: requests sent ahead of the grants would
            // grow the window past the target on a loaded machine (a test with windows at their exact share then
            // found one above it)
            int before = pool.committed();
            peer.sendWantingCredit(64);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
            while (pool.committed() == before && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
        }
    }

    @Test
    void aPeerThePoolCannotRecallKeepsTheMinimumHoweverOftenItAsks() throws Exception {
        // before: it grew to receiveSlots + 1 like any other, and since it is never asked to give credits back, it
        // kept them for good: about 8 such connections held a default pool of 512
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, base().sharedReceiveSlots(64).build())) {
            RdmaServer s = server.listen(Peers.serverAddress(), ch -> new Peers.Recorder());
            try (RawPeer hog = RawPeer.connect(fabric, s.localAddress(), grows(false))) {
                assertEquals(TransportConfig.SHARED_MIN_CREDITS, hog.server().initialCredits());
                assertEquals(TransportConfig.SHARED_MIN_CREDITS, hog.server().maxCredits(),
                        "the handshake tells it that its window does not grow");
                SharedReceivePool pool = SharedReceiveQueueTest.poolOf(server);
                for (int f = 0; f < 40; f++) {
                    hog.sendWantingCredit(64);
                }
                assertEquals(TransportConfig.SHARED_MIN_CREDITS, pool.committed(), "no growth: " + pool);
                assertFalse(hog.isLost(), "served, at the minimum");
            }
            fabric.assertNoViolations();
        } finally {
            fabric.close();
        }
    }

    @Test
    void aCreditFramesHintGrowsNothing() throws Exception {
        // a credit frame carries no data, so no frame waits behind it: before, its hint grew the window all the same,
        // so a peer could grow without sending anything its handler would see
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, base().sharedReceiveSlots(64).build())) {
            RdmaServer s = server.listen(Peers.serverAddress(), ch -> new Peers.Recorder());
            try (RawPeer peer = RawPeer.connect(fabric, s.localAddress(), grows(true))) {
                SharedReceivePool pool = SharedReceiveQueueTest.poolOf(server);
                for (int f = 0; f < 20; f++) {
                    peer.send(FrameHeader.CREDIT, FrameHeader.HINT_CREDIT_WANTED, 0, 0, new byte[0], false);
                }
                assertEquals(TransportConfig.SHARED_MIN_CREDITS, pool.committed(), "no growth: " + pool);
                assertFalse(peer.isLost());
            }
            fabric.assertNoViolations();
        } finally {
            fabric.close();
        }
    }

    @Test
    void growthLeavesTheReserveToNewcomersWhoAreAdmittedAtOnce() throws Exception {
        // 4 windows that ask on every frame (and never answer recalls) in a pool of 64: before, they took all of it
        // (17 + 17 + 17 + 13) and the next connection was refused; the last eighth (8) is now never grown into
        TransportConfig serverConfig = base().sharedReceiveSlots(64).build();
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, serverConfig);
             RdmaTransport client = RdmaTransport.create(fabric, base().build())) {
            RdmaServer s = server.listen(Peers.serverAddress(), ch -> new Peers.Recorder());
            RawPeer[] hogs = new RawPeer[4];
            try {
                for (int h = 0; h < hogs.length; h++) {
                    hogs[h] = RawPeer.connect(fabric, s.localAddress(), grows(true));
                }
                SharedReceivePool pool = SharedReceiveQueueTest.poolOf(server);
                for (int round = 0; round < 4; round++) {
                    for (RawPeer hog : hogs) {
                        for (int f = 0; f < 4; f++) {
                            hog.sendWantingCredit(64);
                        }
                    }
                }
                assertTrue(pool.peakCommitted <= 64 - 8, "growth took the reserve: peak " + pool.peakCommitted);
                RdmaChannel newcomer = client.connect(s.localAddress(), new Peers.Recorder());
                assertEquals(0, pool.admissionsRefused, "the newcomer was admitted at once: " + pool);
                assertEquals(0, s.stats().refused());
                newcomer.close();
            } finally {
                for (RawPeer hog : hogs) {
                    if (hog != null) {
                        hog.close();
                    }
                }
            }
            fabric.assertNoViolations();
        } finally {
            fabric.close();
        }
    }

    /**
     * One loop with a pool of 24 and no more loops: a hog (a raw peer that states recall and never answers one) grown
     * to receiveSlots + 1 = 17, and B, an honest client at the minimum: 21 of 24 promised, so C (4 more) finds no room.
     */
    private static final class ContestedPool implements AutoCloseable {
        final TransportConfig serverConfig = base().sharedReceiveSlots(24).build();
        final FakeFabric fabric = new FakeFabric();
        final Map<String, Peers.Recorder> sides = new ConcurrentHashMap<>();
        final RdmaTransport server;
        final RdmaTransport client;
        final RdmaServer s;
        final RawPeer hog;
        final SharedReceivePool pool;
        final RdmaChannel b;

        ContestedPool() throws Exception {
            server = RdmaTransport.create(fabric, serverConfig);
            client = RdmaTransport.create(fabric, base().build());
            s = SharedReceiveQueueTest.listenRecordingSides(server, sides);
            hog = RawPeer.connect(fabric, s.localAddress(), grows(true));
            pool = SharedReceiveQueueTest.poolOf(server);
            growTo(hog, pool, serverConfig.receiveSlots() + 1);
            assertEquals(serverConfig.receiveSlots() + 1, pool.committed(), "the hog's window grew: " + pool);
            b = client.connect(s.localAddress(), new Peers.Recorder());
        }

        @Override
        public void close() throws Exception {
            try {
                b.close();
                hog.close();
                client.close();
                server.close();
                fabric.assertNoViolations();
            } finally {
                fabric.close();
            }
        }
    }

    @Test
    void aWindowKeptThroughRecallsIsFailedAndTheNewcomerAdmitted() throws Exception {
        // the hog neither spends nor answers a recall. Before, C was refused for good (the listener said its loops
        // were full); now the hog, which holds the most, is failed and C is admitted
        try (ContestedPool p = new ContestedPool()) {
            RdmaChannel c = connectRetrying(p.client, p.s, 5);
            assertTrue(p.pool.admissionsRefused >= 1, "C found the pool full first: " + p.pool);
            p.hog.awaitLost(5000);
            for (RdmaChannel ch : new RdmaChannel[] {p.b, c}) {
                for (int f = 0; f < 50; f++) {
                    ch.write(ByteBuffer.wrap(Peers.payload(3, f, 300)), true);
                }
                Peers.Recorder r = SharedReceiveQueueTest.awaitSide(p.sides, ch);
                Peers.await("B's and C's frames", 10_000, () -> r.count() == 50);
            }
            assertEquals(2, p.server.channelCount(), "only the hog was failed");
            c.close();
        }
    }

    @Test
    void aWindowKeptWhileOnlyGrowthFindsNoRoomIsCappedNotFailed() throws Exception {
        // B streams and asks for more; the hog's window leaves no room to grow. What the pool sees of a peer's
        // spending is what arrives, and a busy sender's SENDs can spend longer than an interval on a congested
        // fabric: the lab's burst of 100 connections had honest senders failed that way. So growth alone caps the
        // hog but fails nobody; only a refused admission does (aWindowKeptThroughRecallsIsFailedAndTheNewcomerAdmitted)
        try (ContestedPool p = new ContestedPool()) {
            long recallsBefore = p.pool.recalls();
            for (int f = 0; f < 200; f++) {
                p.b.write(ByteBuffer.wrap(Peers.payload(2, f, 300)), f % 20 == 19);
            }
            Peers.await("recalls for B's growth", 5000,
                    () -> p.pool.recalls() >= recallsBefore + 3 || p.server.channelCount() < 2);
            Thread.sleep(2 * SharedReceivePool.RECALL_INTERVAL_NANOS / 1_000_000);
            p.hog.poll();
            assertFalse(p.hog.isLost(), "growth alone failed the hog: " + p.pool);
            assertEquals(0, p.pool.admissionsRefused);
            assertEquals(2, p.server.channelCount());
        }
    }

    @Test
    void aSenderThatAsksForMoreOnEveryFrameIsShrunkToItsFairShareNotFailed() throws Exception {
        // the hog keeps sending, every frame saying it wants more: before, that hint kept its window whole for ever
        // and C was refused; now its window shrinks to its fair share as it spends, so C fits, and the hog, which
        // spends what it holds, is served on
        AtomicBoolean stop = new AtomicBoolean();
        AtomicReference<Throwable> hogFailure = new AtomicReference<>();
        AtomicInteger hogFrames = new AtomicInteger();
        try (ContestedPool p = new ContestedPool()) {
            Thread sender = new Thread(() -> {
                try {
                    while (!stop.get()) {
                        p.hog.sendWantingCredit(64);
                        hogFrames.incrementAndGet();
                    }
                } catch (Throwable t) {
                    hogFailure.set(t);
                }
            }, "busy-hog");
            sender.start();
            try {
                RdmaChannel c = connectRetrying(p.client, p.s, 5);
                int before = hogFrames.get();
                Peers.await("the hog sending on", 5000, () -> hogFrames.get() > before + 100);
                assertTrue(p.pool.committed() <= p.pool.slots(), p.pool.toString());
                c.close();
            } finally {
                stop.set(true);
                sender.join(10_000);
            }
            assertEquals(null, hogFailure.get(), "the hog, which spends what it holds, is not failed");
            assertFalse(p.hog.isLost());
        }
    }

    @Test
    void aPeerIsNotJudgedAHogForCreditsTheServerNeverSentIt() throws Exception {
        // the pool counts a window's credits from the moment it grants them; the channel sends them to the peer only
        // when what it owes reaches the threshold (or data carries them). The lab's burst test (CI of 0891c29) met
        // honest clients that went quiet while the server still owed them most of their window: asked by a recall
        // to give back what they held beyond the minimum, they had nothing to give, and the pool capped, then failed
        // them "for keeping 12 credits above their fair share", credits that had never left the server. Here the
        // peer grows to 17, then spends all but 2 without asking for more: the server owes it 15 (threshold 16).
        // Now a recall first takes back what was never sent: the peer, which holds 2, is left alone.
        TransportConfig serverConfig = base().sharedReceiveSlots(24).creditThreshold(16).build();
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, serverConfig);
             RdmaTransport client = RdmaTransport.create(fabric, base().build())) {
            RdmaServer s = server.listen(Peers.serverAddress(), ch -> new Peers.Recorder());
            try (RawPeer quiet = RawPeer.connect(fabric, s.localAddress(), grows(true))) {
                SharedReceivePool pool = SharedReceiveQueueTest.poolOf(server);
                growTo(quiet, pool, serverConfig.receiveSlots() + 1);
                assertEquals(serverConfig.receiveSlots() + 1, pool.committed(), "the window grew: " + pool);
                long releasedBefore = pool.creditsReleased();
                quiet.poll();
                while (quiet.credits() > 2) {
                    quiet.send(FrameHeader.FIRST | FrameHeader.LAST, 0, 64, new byte[64], false);
                }
                // the growth asked for a recall, and B and C need room (C none at first, unless that recall ran)
                RdmaChannel b = client.connect(s.localAddress(), new Peers.Recorder());
                RdmaChannel c = connectRetrying(client, s, 5);
                assertTrue(pool.creditsReleased() > releasedBefore, "a recall took back what was owed: " + pool);
                Thread.sleep(4 * SharedReceivePool.RECALL_INTERVAL_NANOS / 1_000_000); // past a judge's sentence
                quiet.poll();
                assertFalse(quiet.isLost(), "the quiet peer, holding 2 credits, was not failed: " + pool);
                assertEquals(3, server.channelCount(), "nobody was failed");
                quiet.send(FrameHeader.FIRST | FrameHeader.LAST, 0, 64, new byte[64], false);
                b.close();
                c.close();
            }
            fabric.assertNoViolations();
        } finally {
            fabric.close();
        }
    }

    @Test
    void aPeerSendingBeyondItsCreditsIsStoppedAtItsFirstExtraSendBeforeItDrainsTheSharedQueue() throws Exception {
        // a pool of 16: the honest client H and the violator V hold 4 credits each, 8 receives are spare. The loop
        // falls behind (its completions are held), V sends its 4 credits' worth and one SEND more, H one frame whose
        // handler keeps the loop in that batch; meanwhile V bursts 10 more. Before, the check ran when the batch was
        // applied, so V's queue pair was still up: its burst emptied the shared queue and H's next SEND met RNR
        // (rnrRetryCount 0: H failed). Now the completion of V's first extra SEND moves V's queue pair to error
        // before the rest of the batch is handled, and the burst takes nothing.
        TransportConfig serverConfig = base().sharedReceiveSlots(16).build();
        FakeFabric fabric = new FakeFabric();
        Peers.HoldingRecorder honestSide = new Peers.HoldingRecorder();
        AtomicInteger accepted = new AtomicInteger();
        try (RdmaTransport server = RdmaTransport.create(fabric, serverConfig);
             RdmaTransport client = RdmaTransport.create(fabric, base().build())) {
            RdmaServer s = server.listen(Peers.serverAddress(),
                    ch -> accepted.getAndIncrement() == 0 ? honestSide : new Peers.Recorder());
            RdmaChannel honest = client.connect(s.localAddress(), new Peers.Recorder());
            try (RawPeer violator = RawPeer.connect(fabric, s.localAddress(), grows(true))) {
                assertEquals(TransportConfig.SHARED_MIN_CREDITS, violator.server().initialCredits());
                fabric.holdCompletions(s.localAddress());
                for (int f = 0; f <= TransportConfig.SHARED_MIN_CREDITS; f++) { // one more than its credits
                    violator.send(FrameHeader.FIRST | FrameHeader.LAST, 0, 64, new byte[64], true);
                }
                honest.write(ByteBuffer.wrap(Peers.payload(5, 0, 100)), true);
                Peers.await("H's frame behind V's in the held queue", 5000,
                        () -> fabric.receivesWaiting(s.localAddress(), honest.localAddress()) == 1);
                assertEquals(TransportConfig.SHARED_MIN_CREDITS + 1,
                        fabric.receivesWaiting(s.localAddress(), violator.qp().localAddress()));
                fabric.releaseCompletions(s.localAddress());
                assertTrue(honestSide.inHandler.await(5, java.util.concurrent.TimeUnit.SECONDS),
                        "the loop reached H's frame");
                try {
                    violator.burstIgnoringCredits(10, 64);
                    Thread.sleep(100); // the wire executes the burst meanwhile
                    honest.write(ByteBuffer.wrap(Peers.payload(5, 1, 100)), true);
                    Thread.sleep(100);
                } finally {
                    honestSide.release.countDown();
                }
                violator.awaitLost(5000);
                // V took at most one receive beyond its credits: the others' credits stayed backed by posted receives
                assertTrue(fabric.srqLowWater() >= 16 - 2 * TransportConfig.SHARED_MIN_CREDITS - 1,
                        "the shared queue fell to " + fabric.srqLowWater() + " posted receives");
            }
            for (int f = 2; f < 50; f++) {
                honest.write(ByteBuffer.wrap(Peers.payload(5, f, 100)), true);
            }
            Peers.await("H's frames", 10_000, () -> honestSide.count() == 50);
            assertFalse(honestSide.closed.isDone(), "H was not failed");
            assertEquals(1, server.channelCount(), "only V was failed");
            fabric.assertNoViolations(); // no RNR: no SEND met an empty shared queue
            honest.close();
        } finally {
            fabric.close();
        }
    }

    /**
     * Connects, asking again up to {@code attempts} times while refused: a refusal while the pool judges a hog
     * ends, after connect's own retries, in an exception.
     */
    private static RdmaChannel connectRetrying(RdmaTransport client, RdmaServer s, int attempts) throws Exception {
        FabricException last = null;
        for (int i = 0; i < attempts; i++) {
            try {
                return client.connect(s.localAddress(), new Peers.Recorder());
            } catch (FabricException e) {
                last = e;
            }
        }
        throw new AssertionError("still refused after " + attempts + " attempts", last);
    }
}
