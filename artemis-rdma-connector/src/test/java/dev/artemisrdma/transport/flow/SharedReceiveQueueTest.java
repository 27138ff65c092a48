package dev.artemisrdma.transport.flow;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.Connection;
import dev.artemisrdma.transport.FakeFabric;
import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.RawPeer;
import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.loop.CompletionLoop;
import dev.artemisrdma.transport.stats.TransportStats;
import dev.artemisrdma.transport.wire.FrameHeader;
import dev.artemisrdma.transport.wire.Handshake;

/**
 * Shared receive queue mode on a FakeFabric that enforces SRQ rules: a SEND to a queue pair on an SRQ consumes the
 * SRQ's receive, an empty SRQ with rnrRetryCount 0 is an RNR failure (a recorded violation).
 */
class SharedReceiveQueueTest {

    private static TransportConfig.Builder base() {
        return TransportConfig.builder().rnrRetryCount(0).busyPollMicros(0).receiveSlots(16).slotSize(512)
                .sendQueueDepth(32);
    }

    @Test
    void manyConnectionsBurstingAtOnceNeverMeetAnEmptySharedQueue() throws Exception {
        int clients = 16;
        int frames = 400;
        // the pool holds exactly every connection's guaranteed minimum: growth must come from nowhere but credits
        int poolSlots = clients * TransportConfig.SHARED_MIN_CREDITS;
        TransportConfig serverConfig = base().sharedReceiveSlots(poolSlots).completionQueueEntries(16384).build();
        TransportConfig clientConfig = base().build();
        FakeFabric fabric = new FakeFabric();
        Map<String, Peers.Recorder> serverSides = new ConcurrentHashMap<>();
        long poolBytes;
        try (RdmaTransport server = RdmaTransport.create(fabric, serverConfig);
             RdmaTransport client = RdmaTransport.create(fabric, clientConfig)) {
            RdmaServer s = server.listen(Peers.serverAddress(), ch -> {
                Peers.Recorder r = new Peers.Recorder();
                serverSides.put(ch.remoteAddress().toString(), r);
                return r;
            });
            List<RdmaChannel> channels = new ArrayList<>();
            List<Peers.Recorder> clientSides = new ArrayList<>();
            for (int i = 0; i < clients; i++) {
                Peers.Recorder r = new Peers.Recorder();
                clientSides.add(r);
                channels.add(client.connect(s.localAddress(), r));
            }
            assertEquals(1, server.sharedReceivePools(), "all accepted connections on one loop's pool");
            poolBytes = server.sharedReceivePoolBytes();
            assertEquals((long) poolSlots * 512, poolBytes);
            // every client bursts at once, from its own thread
            CountDownLatch go = new CountDownLatch(1);
            List<Thread> writers = new ArrayList<>();
            for (int i = 0; i < clients; i++) {
                int c = i;
                Thread t = new Thread(() -> {
                    try {
                        go.await();
                        for (int f = 0; f < frames; f++) {
                            channels.get(c).write(ByteBuffer.wrap(Peers.payload(c, f, 1 + (f * 97) % 1500)),
                                    f % 7 == 0);
                        }
                        channels.get(c).flush();
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                });
                t.start();
                writers.add(t);
            }
            go.countDown();
            // and the server answers each one, so credits flow both ways
            for (int i = 0; i < clients; i++) {
                Peers.Recorder r = awaitSide(serverSides, channels.get(i));
                Peers.await("frames of client " + i, 30_000, () -> r.count() == frames);
                for (int f = 0; f < frames; f++) {
                    assertEquals(Peers.crc(Peers.payload(i, f, 1 + (f * 97) % 1500)), r.crcs.get(f),
                            "frame " + f + " of client " + i);
                }
            }
            for (Thread t : writers) {
                t.join();
            }
            fabric.assertNoViolations(); // no RNR: no SEND met an empty shared queue
            assertTrue(fabric.srqLowWater() >= 0);
            assertEquals(0, fabric.srqLimitEvents(), "the pool never fell below a quarter: credits kept it full");
            assertEquals(clients, server.channelCount());
        }
        assertEquals(0, fabric.liveQueuePairs());
        assertEquals(0, fabric.liveSharedReceiveQueues(), "the SRQ is destroyed with its loop");
        assertEquals(0, fabric.liveCompletionQueues());
        assertEquals(0, fabric.liveMemoryRegions());
        fabric.assertNoViolations();
        fabric.close();
        System.out.printf("SRQ unit: %d connections, pool %d KiB; per-connection queues would register %d KiB%n",
                clients, poolBytes >> 10, (long) clients * 17 * 512 >> 10);
    }

    /**
     * A loop that stays busy reposts its shared queue's receives in lists of up to 16, where it posted one list per
     * batch (one receive per message in a ping-pong): the consumed receives it holds back meanwhile are covered by
     * the pool's spare, so no SEND meets an empty queue; and when the loop goes idle it posts what it held.
     */
    @Test
    void aBusyLoopRepostsItsSharedQueueInBatchesAndPostsWhatItHeldWhenIdle() throws Exception {
        int slots = 256;
        int roundTrips = 2_005; // not a multiple of 16: the last receives are held when the loop goes idle
        // the server's loop spins between messages (as the benchmarks' does), so it goes from batch to batch
        TransportConfig serverConfig = base().sharedReceiveSlots(slots).busyPollMicros(20_000).build();
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, serverConfig);
             RdmaTransport client = RdmaTransport.create(fabric, base().build())) {
            RdmaServer s = server.listen(Peers.serverAddress(), ch -> new ChannelHandler() {
                @Override
                public void onFrame(RdmaChannel channel, ByteBuffer frame) {
                    try {
                        channel.write(frame, true); // the echo
                    } catch (FabricException e) {
                        throw new IllegalStateException(e);
                    }
                }

                @Override
                public void onClosed(RdmaChannel channel, FabricException cause) {
                }
            });
            CountDownLatch done = new CountDownLatch(1);
            AtomicInteger answers = new AtomicInteger();
            RdmaChannel ch = client.connect(s.localAddress(), new ChannelHandler() {
                @Override
                public void onFrame(RdmaChannel channel, ByteBuffer frame) {
                    int n = answers.incrementAndGet();
                    if (frame.remaining() != 64 || frame.getInt(frame.position()) != n - 1) {
                        throw new IllegalStateException("answer " + n + " is not the frame sent");
                    }
                    if (n == roundTrips) {
                        done.countDown();
                        return;
                    }
                    try {
                        channel.write(ByteBuffer.allocate(64).putInt(0, n), true);
                    } catch (FabricException e) {
                        throw new IllegalStateException(e);
                    }
                }

                @Override
                public void onClosed(RdmaChannel channel, FabricException cause) {
                }
            });
            long postsBefore = fabric.sharedReceivePostCalls();
            ch.write(ByteBuffer.allocate(64).putInt(0, 0), true);
            assertTrue(done.await(60, TimeUnit.SECONDS), "round trips done: " + answers.get());
            long posts = fabric.sharedReceivePostCalls() - postsBefore;
            assertTrue(posts <= roundTrips / 4, posts + " posts on the shared queue for " + roundTrips
                    + " receives: not batched");
            fabric.assertNoViolations(); // no RNR: the held receives never left a credit without a receive
            Peers.await("the idle loop posted every receive", 5_000, () -> fabric.sharedReceivesPosted() == slots);
            System.out.printf("SRQ unit: %d receives reposted in %d posts; fewest posted after a SEND: %d of %d%n",
                    roundTrips, posts, fabric.srqLowWater(), slots);
        }
        fabric.assertNoViolations();
        fabric.close();
    }

    @Test
    void aLoneFastSenderGrowsItsWindowBeyondTheMinimumAndGivesItBackOnClose() throws Exception {
        TransportConfig serverConfig = base().sharedReceiveSlots(256).build();
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, serverConfig);
             RdmaTransport client = RdmaTransport.create(fabric, base().build())) {
            Peers.Recorder r = new Peers.Recorder();
            RdmaServer s = server.listen(Peers.serverAddress(), ch -> r);
            RdmaChannel ch = client.connect(s.localAddress(), new Peers.Recorder());
            for (int f = 0; f < 2000; f++) {
                ch.write(ByteBuffer.wrap(Peers.payload(1, f, 200)), false);
            }
            ch.flush();
            Peers.await("2000 frames", 30_000, () -> r.count() == 2000);
            SharedReceivePool pool = poolOf(server);
            assertTrue(pool.growthGrants > 0, "a queued stream asked for more credit and got it");
            assertTrue(pool.committed() > TransportConfig.SHARED_MIN_CREDITS, "window grown: " + pool);
            assertTrue(pool.committed() <= serverConfig.receiveSlots() + 1, "never beyond receiveSlots + 1: " + pool);
            ch.close();
            awaitEveryCreditBack(pool, "credits back after the limbo");
            fabric.assertNoViolations();
        }
        assertEquals(0, fabric.liveSharedReceiveQueues());
        fabric.close();
    }

    @Test
    void aBurstThatFitsTheWindowDoesNotGrowIt() throws Exception {
        // a connection's set-up (a few packets, then it waits for answers) never waits for credit: it keeps the
        // minimum, or 1,000 mostly idle connections would each hold a grown window and fill the pools
        try (Connection c = new Connection(base().sharedReceiveSlots(256).build(), base().build())) {
            SharedReceivePool pool = poolOf(c.serverTransport);
            for (int round = 0; round < 5; round++) {
                int from = c.serverSide.count();
                for (int f = 0; f < TransportConfig.SHARED_MIN_CREDITS - 1; f++) {
                    c.client.write(ByteBuffer.wrap(Peers.payload(12, from + f, 200)), true);
                }
                int expected = from + TransportConfig.SHARED_MIN_CREDITS - 1;
                Peers.await("the burst", 10_000, () -> c.serverSide.count() == expected);
                Thread.sleep(50); // its credit back before the next burst, as the answer to a set-up packet would
            }
            TransportStats s = c.client.stats();
            assertEquals(0, s.creditStalls(), "each burst fitted the window: " + s);
            assertEquals(0, pool.growthGrants, "no frame waited for credit, yet the window grew: " + pool + " " + s);
            assertEquals(TransportConfig.SHARED_MIN_CREDITS, pool.committed(), pool.toString());
        }
    }

    @Test
    void connectionsBeyondThePoolGoToAnotherLoopAndPool() throws Exception {
        // a pool of two minimums: the third connection needs a second loop with its own pool
        TransportConfig serverConfig = base().sharedReceiveSlots(2 * TransportConfig.SHARED_MIN_CREDITS).build();
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, serverConfig);
             RdmaTransport client = RdmaTransport.create(fabric, base().build())) {
            Map<String, Peers.Recorder> sides = new ConcurrentHashMap<>();
            RdmaServer s = listenRecordingSides(server, sides);
            List<RdmaChannel> channels = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                channels.add(client.connect(s.localAddress(), new Peers.Recorder()));
            }
            assertEquals(2, server.sharedReceivePools());
            for (int i = 0; i < 3; i++) {
                for (int f = 0; f < 100; f++) {
                    channels.get(i).write(ByteBuffer.wrap(Peers.payload(i, f, 300)), true);
                }
            }
            for (int i = 0; i < 3; i++) {
                Peers.Recorder r = awaitSide(sides, channels.get(i));
                Peers.await("frames", 10_000, () -> r.count() == 100);
            }
            fabric.assertNoViolations();
        }
        assertEquals(0, fabric.liveSharedReceiveQueues());
        assertEquals(0, fabric.liveMemoryRegions());
        fabric.close();
    }

    @Test
    void aPeerThatPredatesCreditGrowthKeepsItsOwnQueueAndAnOldHandshakeDecodesAsAFixedWindow() throws Exception {
        Handshake.Params old = Handshake.decodeConnect(Handshake.encodeConnect(new Handshake.Params(1024, 9, 1 << 20,
                Handshake.FEATURE_PACKED)));
        assertFalse(old.acceptsCreditGrowth());
        assertEquals(9, old.maxCredits());
        Handshake.Params grows = Handshake.decodeAccept(Handshake.encodeAccept(new Handshake.Params(1024, 4, 1 << 20,
                Handshake.FEATURE_PACKED | Handshake.FEATURE_CREDIT_GROWTH, 65)));
        assertTrue(grows.acceptsCreditGrowth());
        assertEquals(65, grows.maxCredits());
        byte[] bad = Handshake.encodeAccept(new Handshake.Params(1024, 9, 1 << 20, Handshake.FEATURE_CREDIT_GROWTH, 5));
        try {
            Handshake.decodeAccept(bad);
            throw new AssertionError("a maximum below the initial credits must be refused");
        } catch (Handshake.HandshakeException e) {
            assertTrue(e.getMessage().contains("maximum credits"), e.getMessage());
        }
    }

    @Test
    void aPeerThatSpendsCreditItWasNeverSentFailsAloneAndTheOthersGoOn() throws Exception {
        FakeFabric fabric = new FakeFabric();
        TransportConfig serverConfig = base().sharedReceiveSlots(64).build();
        try (RdmaTransport server = RdmaTransport.create(fabric, serverConfig);
             RdmaTransport client = RdmaTransport.create(fabric, base().build())) {
            Map<String, Peers.Recorder> sides = new ConcurrentHashMap<>();
            Map<String, RdmaChannel> serverChannels = new ConcurrentHashMap<>();
            RdmaServer s = server.listen(Peers.serverAddress(), ch -> {
                Peers.Recorder r = new Peers.Recorder();
                sides.put(ch.remoteAddress().toString(), r);
                serverChannels.put(ch.remoteAddress().toString(), ch);
                ch.setAutoRead(false); // hold the credits back: the peer keeps only its initial 4
                return r;
            });
            RdmaChannel honest = client.connect(s.localAddress(), new Peers.Recorder());
            byte[] grows = Handshake.encodeConnect(new Handshake.Params(RawPeer.SLOT, RawPeer.RECEIVES, 64 << 20,
                    Handshake.FEATURE_CREDIT_GROWTH, RawPeer.RECEIVES));
            try (RawPeer cheat = RawPeer.connect(fabric, s.localAddress(), grows)) {
                assertEquals(TransportConfig.SHARED_MIN_CREDITS, cheat.server().initialCredits());
                cheat.burstIgnoringCredits(12, 100); // 8 receives promised to others
                cheat.awaitLost(5000);
            }
            serverChannels.get(honest.localAddress().toString()).setAutoRead(true);
            for (int f = 0; f < 50; f++) {
                honest.write(ByteBuffer.wrap(Peers.payload(7, f, 300)), true);
            }
            Peers.Recorder r = awaitSide(sides, honest);
            Peers.await("the honest client's frames", 10_000, () -> r.count() == 50);
            assertEquals(1, server.channelCount(), "only the cheat was dropped");
        }
        assertEquals(0, fabric.liveSharedReceiveQueues());
        fabric.close();
    }

    @Test
    void idleGrownWindowsAreRecalledSoTheNextConnectionIsAdmitted() throws Exception {
        // one loop with a pool of 24: a stream grows A's window to receiveSlots + 1 = 17, B takes the minimum (21 of
        // 24 promised), so C (4 more) is refused. Before recalls A kept 17 while idle, for good.
        TransportConfig serverConfig = base().sharedReceiveSlots(24).maxCompletionLoops(1).build();
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, serverConfig);
             RdmaTransport client = RdmaTransport.create(fabric, base().build())) {
            Map<String, Peers.Recorder> sides = new ConcurrentHashMap<>();
            RdmaServer s = listenRecordingSides(server, sides);
            RdmaChannel a = client.connect(s.localAddress(), new Peers.Recorder());
            for (int f = 0; f < 2000; f++) {
                a.write(ByteBuffer.wrap(Peers.payload(1, f, 200)), false);
            }
            a.flush();
            Peers.Recorder ra = awaitSide(sides, a);
            Peers.await("A's stream", 30_000, () -> ra.count() == 2000);
            SharedReceivePool pool = poolOf(server);
            // its peak: the recall that A's last grant may start (less than a growth step left spare) can shrink it
            // before this line on a loaded host (seen: 4 committed here)
            assertEquals(serverConfig.receiveSlots() + 1, pool.peakCommitted, "A's window grew to its maximum: " + pool);
            RdmaChannel b = client.connect(s.localAddress(), new Peers.Recorder());
            // B takes the minimum beside A's grown window, unless the recall that A's last grant started (it left
            // less than a growth step spare) already shrank A
            int committed = pool.committed();
            assertTrue(committed == serverConfig.receiveSlots() + 1 + TransportConfig.SHARED_MIN_CREDITS
                    || pool.recalls() >= 1 && committed <= serverConfig.receiveSlots() + 1
                    + TransportConfig.SHARED_MIN_CREDITS, "B admitted beside A: " + pool);

            // B's grant left less than a growth step above the reserve, so the loop's next tick recalls A's idle
            // window; if C comes before that tick, its admission finds the pool full, which asks the loop to recall
            // at once, the listener refuses C with 'retry soon' (its event thread never waits for the recall), and
            // connect asks again. Either way C's one call to connect is admitted, thanks to a recall
            // A has written three more frames and not flushed them yet: a window held for unflushed frames is idle,
            // so A still answers the recall (it used to keep its window, and the pool then failed it as a hog)
            for (int f = 2000; f < 2003; f++) {
                a.write(ByteBuffer.wrap(Peers.payload(1, f, 200)), false);
            }
            // (which path C took is not asserted: the loop's tick may start the recall between any two lines here;
            // a full pool that refused C without a recall would fail the recall count below)
            RdmaChannel c = client.connect(s.localAddress(), new Peers.Recorder());
            assertTrue(pool.recalls() >= 1, "C was admitted without a recall: " + pool);
            // A gave back what it held beyond the minimum (less what was still on its way back to it). C may be
            // admitted once the first of A's credits are back (3 were, once, under a loaded full unit run): the
            // rest follow on the loop's next polls, so wait for them rather than read the pool at this instant
            Peers.await("A's recalled credits", 30_000, () -> pool.creditsReleased() >= 8
                    && pool.committed() == 3 * TransportConfig.SHARED_MIN_CREDITS);
            assertTrue(pool.creditsReleased() >= 8, "credits A gave back: " + pool.creditsReleased());
            // what operators see (artemis.rdma.shared.receive.recalls() and .credits.recalled)
            assertEquals(pool.recalls(), server.sharedReceiveRecalls());
            assertEquals(pool.creditsReleased(), server.sharedReceiveCreditsRecalled());
            assertEquals(3 * TransportConfig.SHARED_MIN_CREDITS, pool.committed(), "A back at the minimum: " + pool);

            assertTrue(a.isOpen(), "A answered the recall and was not failed");
            a.flush();
            Peers.await("A's unflushed frames, flushed", 10_000, () -> ra.count() == 2003);
            // A streams again: its window grows back as far as the pool allows, and nothing meets an empty queue
            for (int f = 2003; f < 4000; f++) {
                a.write(ByteBuffer.wrap(Peers.payload(1, f, 200)), false);
            }
            a.flush();
            for (RdmaChannel ch : List.of(b, c)) {
                for (int f = 0; f < 100; f++) {
                    ch.write(ByteBuffer.wrap(Peers.payload(2, f, 300)), true);
                }
            }
            Peers.await("A's second stream", 30_000, () -> ra.count() == 4000);
            Peers.Recorder rb = awaitSide(sides, b);
            Peers.Recorder rc = awaitSide(sides, c);
            Peers.await("B's and C's frames", 10_000, () -> rb.count() == 100 && rc.count() == 100);
            assertTrue(pool.committed() <= pool.slots(), pool.toString());
            fabric.assertNoViolations();
        }
        assertEquals(0, fabric.liveSharedReceiveQueues());
        fabric.close();
    }

    @Test
    void aPeerThatGivesBackCreditsItDoesNotHoldFailsAloneAndTheOthersGoOn() throws Exception {
        FakeFabric fabric = new FakeFabric();
        TransportConfig serverConfig = base().sharedReceiveSlots(64).build();
        try (RdmaTransport server = RdmaTransport.create(fabric, serverConfig);
             RdmaTransport client = RdmaTransport.create(fabric, base().build())) {
            Map<String, Peers.Recorder> sides = new ConcurrentHashMap<>();
            RdmaServer s = listenRecordingSides(server, sides);
            RdmaChannel honest = client.connect(s.localAddress(), new Peers.Recorder());
            byte[] recalls = Handshake.encodeConnect(new Handshake.Params(RawPeer.SLOT, RawPeer.RECEIVES, 64 << 20,
                    Handshake.FEATURE_CREDIT_GROWTH | Handshake.FEATURE_CREDIT_RECALL, RawPeer.RECEIVES));
            try (RawPeer cheat = RawPeer.connect(fabric, s.localAddress(), recalls)) {
                assertEquals(TransportConfig.SHARED_MIN_CREDITS, cheat.server().initialCredits());
                // it holds 4 credits, spends one on this frame, and claims to give back 40: receives that would be
                // counted twice, promised to others
                cheat.send(FrameHeader.CREDIT | FrameHeader.RELEASE, 0, 40, new byte[0], false);
                cheat.awaitLost(5000);
            }
            try (RawPeer zero = RawPeer.connect(fabric, s.localAddress(), recalls)) {
                cheat(zero, FrameHeader.CREDIT | FrameHeader.RELEASE, 0); // outside 1..window
            }
            try (RawPeer huge = RawPeer.connect(fabric, s.localAddress(), recalls)) {
                cheat(huge, FrameHeader.CREDIT | FrameHeader.RELEASE, Integer.MAX_VALUE); // outside 1..window
            }
            try (RawPeer recallsAll = RawPeer.connect(fabric, s.localAddress(), recalls)) {
                // a recall that would leave the server no credit to send with: outside 2..window
                cheat(recallsAll, FrameHeader.CREDIT | FrameHeader.RECALL, 1);
            }
            for (int f = 0; f < 50; f++) {
                honest.write(ByteBuffer.wrap(Peers.payload(7, f, 300)), true);
            }
            Peers.Recorder r = awaitSide(sides, honest);
            Peers.await("the honest client's frames", 10_000, () -> r.count() == 50);
            Peers.await("only the cheats dropped", 5000, () -> server.channelCount() == 1);
            SharedReceivePool pool = poolOf(server);
            Peers.await("the cheats' credits back: only the honest connection's stay promised", 5000, () -> {
                pool.tick(System.nanoTime());
                return pool.connections() == 1 && pool.committed() <= serverConfig.receiveSlots() + 1;
            });
            honest.close();
            awaitEveryCreditBack(pool, "every credit back once the honest connection closed too");
            fabric.assertNoViolations();
        }
        assertEquals(0, fabric.liveSharedReceiveQueues());
        fabric.close();
    }

    @Test
    void aFailedSharedReceiveQueueFailsItsLoopsConnectionsAndNewOnesGetAFreshPool() throws Exception {
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, base().sharedReceiveSlots(64).build());
             RdmaTransport client = RdmaTransport.create(fabric, base().build())) {
            Map<String, Peers.Recorder> sides = new ConcurrentHashMap<>();
            RdmaServer s = listenRecordingSides(server, sides);
            List<RdmaChannel> before = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                RdmaChannel ch = client.connect(s.localAddress(), new Peers.Recorder());
                ch.write(ByteBuffer.wrap(Peers.payload(i, 0, 100)), true);
                before.add(ch);
            }
            for (RdmaChannel ch : before) {
                Peers.Recorder r = awaitSide(sides, ch);
                Peers.await("the first frame", 5000, () -> r.count() == 1);
            }
            SharedReceivePool failedPool = poolOf(server);
            assertEquals(1, fabric.failSharedReceiveQueues("IBV_EVENT_SRQ_ERR on fake0 srq"));
            for (RdmaChannel ch : before) {
                FabricException cause = sides.get(ch.localAddress().toString()).closed.get(5, TimeUnit.SECONDS);
                assertTrue(cause != null && cause.getMessage().contains("IBV_EVENT_SRQ_ERR"), String.valueOf(cause));
            }
            Peers.await("the failed pool's queue destroyed once its connections let go", 5000,
                    () -> fabric.liveSharedReceiveQueues() == 0);
            RdmaChannel after = client.connect(s.localAddress(), new Peers.Recorder());
            for (int f = 0; f < 100; f++) {
                after.write(ByteBuffer.wrap(Peers.payload(9, f, 300)), true);
            }
            Peers.Recorder r = awaitSide(sides, after);
            Peers.await("a new connection's frames, on a fresh loop and pool", 10_000, () -> r.count() == 100);
            assertTrue(poolOf(server) != failedPool, "a new pool serves it");
            fabric.assertNoViolations();
        }
        assertEquals(0, fabric.liveSharedReceiveQueues());
        fabric.close();
    }

    private static void cheat(RawPeer peer, int flags, int count) throws Exception {
        peer.send(flags, 0, count, new byte[0], false);
        peer.awaitLost(5000);
    }

    @Test
    void theKeysParseValidateAndKeepTheirDerivedDefault() {
        TransportConfig d = TransportConfig.defaults();
        assertTrue(d.sharedReceiveQueue(), "a broker's acceptor shares receives by default");
        assertEquals(512, d.sharedReceiveSlots());
        TransportConfig c = TransportConfig.fromMap(Map.of("sharedReceiveQueue", "false", "sharedReceiveSlots", "64"));
        assertFalse(c.sharedReceiveQueue());
        assertEquals(64, c.sharedReceiveSlots());
        // unset, the pool fits a small completion queue beside one connection's sends, and stays derived
        TransportConfig small = TransportConfig.builder().completionQueueEntries(64).sendQueueDepth(24)
                .receiveSlots(8).build();
        assertEquals(40, small.sharedReceiveSlots());
        assertEquals(512, small.toBuilder().completionQueueEntries(16384).build().sharedReceiveSlots());
        IllegalArgumentException bad = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("sharedReceiveQueue", "yes")));
        assertTrue(bad.getMessage().startsWith("sharedReceiveQueue:"), bad.getMessage());
        IllegalArgumentException big = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.builder().completionQueueEntries(1024).sharedReceiveSlots(1000).build());
        assertTrue(big.getMessage().contains("sharedReceiveSlots"), big.getMessage());
        IllegalArgumentException tiny = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.builder().sharedReceiveSlots(2).build());
        assertTrue(tiny.getMessage().startsWith("sharedReceiveSlots:"), tiny.getMessage());
    }

    static SharedReceivePool poolOf(RdmaTransport transport) throws Exception {
        java.lang.reflect.Field f = RdmaTransport.class.getDeclaredField("devices");
        f.setAccessible(true);
        for (Object res : ((Map<?, ?>) f.get(transport)).values()) {
            java.lang.reflect.Field loops = res.getClass().getDeclaredField("loops");
            loops.setAccessible(true);
            for (Object loop : (List<?>) loops.get(res)) {
                SharedReceivePool p = ((CompletionLoop) loop).sharedPool();
                if (p != null) {
                    return p;
                }
            }
        }
        throw new AssertionError("no shared pool");
    }

    /** Waits (ticking the pool, as its loop would) until no credit of {@code pool} is promised or in limbo. */
    private static void awaitEveryCreditBack(SharedReceivePool pool, String what) throws InterruptedException {
        Peers.await(what, 5000, () -> {
            pool.tick(System.nanoTime());
            return pool.committed() == 0;
        });
    }

    /** Listens with a recorder per accepted connection, filed under the client's address. */
    static RdmaServer listenRecordingSides(RdmaTransport server, Map<String, Peers.Recorder> sides)
            throws FabricException {
        return server.listen(Peers.serverAddress(), ch -> {
            Peers.Recorder r = new Peers.Recorder();
            sides.put(ch.remoteAddress().toString(), r);
            return r;
        });
    }

    static Peers.Recorder awaitSide(Map<String, Peers.Recorder> sides, RdmaChannel clientChannel)
            throws InterruptedException {
        String key = clientChannel.localAddress().toString();
        Peers.await("server side of " + key, 5000, () -> sides.containsKey(key));
        return sides.get(key);
    }
}
