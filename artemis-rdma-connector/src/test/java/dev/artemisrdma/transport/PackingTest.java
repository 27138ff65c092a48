package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.stats.ChannelGroupStats;
import dev.artemisrdma.transport.stats.TransportStats;
import dev.artemisrdma.transport.wire.FrameHeader;

/**
 * Issue 11, first item: small frames that queued go several to a SEND (one credit, one receive slot), a lone frame
 * leaves at once, order holds around fragmented frames, a packed SEND whose inner lengths lie fails its connection
 * only, and a peer that does not state the feature never gets one.
 */
class PackingTest {

    private static TransportConfig strict() {
        return TransportConfig.builder().rnrRetryCount(0).busyPollMicros(0).build();
    }

    @Test
    void framesQueuedBehindACreditWaitLeaveSeveralToASend() throws Exception {
        // the per-connection window of 8 (a shared pool would start it at its minimum and grow it)
        TransportConfig eight = strict().toBuilder().receiveSlots(8).sharedReceiveQueue(false).build();
        try (Connection c = new Connection(eight, eight)) {
            c.serverChannel.setAutoRead(false);
            // the window is 8 frames: each leaves alone, at once
            for (int i = 0; i < 8; i++) {
                c.client.write(ByteBuffer.wrap(Peers.payload(1, i, 64)), true);
            }
            Peers.await("the window", 5000, () -> c.serverSide.count() == 8);
            TransportStats alone = c.client.stats();
            assertEquals(8, alone.sendsPosted(), alone.toString());
            assertEquals(0, alone.framesPacked(), alone.toString());
            // these queue behind the credit wait
            int total = 400;
            for (int i = 8; i < total; i++) {
                c.client.write(ByteBuffer.wrap(Peers.payload(1, i, 64)), true);
            }
            Thread.sleep(20);
            assertEquals(8, c.serverSide.count(), "nothing beyond the credits given");
            c.serverChannel.setAutoRead(true);
            Peers.await("the rest", 5000, () -> c.serverSide.count() == total);
            for (int i = 0; i < total; i++) {
                assertEquals(Peers.crc(Peers.payload(1, i, 64)), c.serverSide.crcs.get(i), "frame " + i);
                assertEquals(64, c.serverSide.sizes.get(i));
            }
            TransportStats s = c.client.stats();
            assertEquals(total, s.framesSent());
            assertEquals(total, c.serverChannel.stats().framesReceived());
            // 16 KiB slots hold 240 frames of 64 bytes: the backlog needs a couple of SENDs, not 392
            assertTrue(s.framesPacked() >= total - 8 - 1, s.toString());
            assertTrue(s.packedSends() <= 4, s.toString());
            assertTrue(s.framesPerDataSend() > 10, s.toString());
        }
    }

    @Test
    void aLoneFrameIsNeverHeldBack() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            for (int i = 0; i < 3; i++) {
                int n = i;
                c.client.write(ByteBuffer.wrap(Peers.payload(2, i, 10)), true);
                // arrives with no later write, flush or timer to push it out
                Peers.await("frame " + i, 5000, () -> c.serverSide.count() == n + 1);
            }
            TransportStats s = c.client.stats();
            assertEquals(0, s.framesPacked(), s.toString());
            assertEquals(3, s.sendsPosted() - s.creditFramesSent(), s.toString());
        }
    }

    @Test
    void unflushedWritesGoAsOneSendOnFlush() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            for (int i = 0; i < 20; i++) {
                c.client.write(ByteBuffer.wrap(Peers.payload(3, i, 1 + i * 50)), false);
            }
            c.client.flush();
            Peers.await("frames", 5000, () -> c.serverSide.count() == 20);
            for (int i = 0; i < 20; i++) {
                assertEquals(Peers.crc(Peers.payload(3, i, 1 + i * 50)), c.serverSide.crcs.get(i), "frame " + i);
            }
            TransportStats s = c.client.stats();
            // 20 frames of 1..951 bytes (9,520 with their lengths) fit one 16 KiB slot; nothing but the writer's
            // flush posts them (the client's loop, handling the handshake's credit meanwhile, leaves them alone)
            assertEquals(20, s.framesPacked(), s.toString());
            assertEquals(1, s.packedSends(), s.toString());
            assertEquals(1, s.sendsPosted(), s.toString());
            // what monitoring shows: a peer of this build, and the frames that went packed
            assertFalse(c.client.olderPeer(), "a peer of this build states every feature");
            ChannelGroupStats group = new ChannelGroupStats();
            group.add(c.client);
            assertEquals(0, group.snapshot().olderPeers());
            assertEquals(20, group.snapshot().framesPacked());
        }
    }

    @Test
    void framesWrittenWithoutFlushWaitForTheWritersFlushWhateverTheLoopDoes() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            for (int i = 0; i < 3; i++) {
                c.client.write(ByteBuffer.wrap(Peers.payload(4, i, 100)), false);
            }
            // the server talks to the client meanwhile: the client's loop handles those completions and flushes
            // the channel (credit going back), which must not post what the writer has not flushed yet
            for (int i = 0; i < 20; i++) {
                c.serverChannel.write(ByteBuffer.wrap(Peers.payload(5, i, 64)), true);
            }
            Peers.await("the server's frames", 5000, () -> c.clientSide.count() == 20);
            Thread.sleep(100); // a loop tick (20 ms) or two as well
            assertEquals(0, c.serverSide.count(), "an unflushed frame left before its writer flushed");
            c.client.flush();
            Peers.await("frames", 5000, () -> c.serverSide.count() == 3);
            TransportStats s = c.client.stats();
            assertEquals(3, s.framesPacked(), s.toString());
            assertEquals(1, s.packedSends(), s.toString());
        }
    }

    @Test
    void fragmentedFramesAreNeverPackedAndOrderHoldsAroundThem() throws Exception {
        TransportConfig small = strict().toBuilder().slotSize(1024).build();
        try (Connection c = new Connection(small, small)) {
            c.serverChannel.setAutoRead(false);
            List<Integer> sizes = new ArrayList<>();
            int[] pattern = {10, 20, 5000, 30, 1016, 40, 1017, 50, 60, 3000, 0, 70, 500, 500};
            for (int r = 0; r < 20; r++) {
                for (int size : pattern) {
                    sizes.add(size);
                }
            }
            for (int i = 0; i < sizes.size(); i++) {
                c.client.write(ByteBuffer.wrap(Peers.payload(4, i, sizes.get(i))), i % 3 == 0);
            }
            c.client.flush();
            Thread.sleep(10);
            c.serverChannel.setAutoRead(true);
            Peers.await("frames", 10_000, () -> c.serverSide.count() == sizes.size());
            for (int i = 0; i < sizes.size(); i++) {
                assertEquals(Peers.crc(Peers.payload(4, i, sizes.get(i))), c.serverSide.crcs.get(i), "frame " + i);
            }
            TransportStats s = c.client.stats();
            assertTrue(s.framesPacked() > 0, s.toString());
            // per round the fragmented frames (5000, 1017, 3000 bytes: 5 + 2 + 3 fragments of 1016) went one fragment
            // per SEND, the 1016-byte frame (a full slot) alone, and the small ones between them in at least one more
            assertTrue(s.sendsPosted() - s.creditFramesSent() >= 20 * 12, s.toString());
            c.fabric.assertNoViolations();
        }
    }

    @Test
    void innerLengthsThatLieFailThatConnectionOnly() throws Exception {
        byte[][] lies = {
            packed(new int[] {10, 20}, 30),            // the second frame says 20 bytes, the SEND ends before
            packed(new int[] {10, 1 << 30}, 30),        // a length far past the slot
            packed(new int[] {10, -5}, 30),             // a negative length
            packed(new int[] {10, 10}, 16),             // the SEND ends inside the second frame's header
            packed(new int[] {10, 2}, 40),              // bytes left after the last frame
        };
        int[] counts = {2, 2, 2, 2, 2};
        try (HostileServerFixture f = new HostileServerFixture(strict())) {
            for (int i = 0; i < lies.length; i++) {
                try (RawPeer peer = f.attacker()) {
                    peer.send(FrameHeader.PACKED, 0, counts[i], lies[i], false);
                    peer.awaitLost(5000);
                    String why = f.closeCause(i).getMessage();
                    assertTrue(why.contains("protocol error") && why.contains("packed"), why);
                    assertEquals(0, f.accepted.get(i).count(), "no frame of a lying SEND is delivered");
                }
                f.assertStillServes(100);
                f.accepted.remove(f.accepted.size() - 1); // the well-behaved client's channel
            }
        }
    }

    @Test
    void aPackedSendMustStandAloneAndNeverInsideAFragmentedFrame() throws Exception {
        byte[] honest = packed(new int[] {3, 4}, 15);
        try (HostileServerFixture f = new HostileServerFixture(strict())) {
            try (RawPeer peer = f.attacker()) {
                peer.send(FrameHeader.PACKED, 0, 2, honest, false);
                peer.send(FrameHeader.PACKED, 0, 3, honest, false); // says 3 frames, holds 2
                peer.awaitLost(5000);
                assertEquals(List.of(3, 4), f.accepted.get(0).sizes, "the honest SEND was delivered, in order");
                assertTrue(f.closeCause(0).getMessage().contains("protocol error"), f.closeCause(0).getMessage());
            }
            try (RawPeer peer = f.attacker()) {
                peer.send(FrameHeader.PACKED | FrameHeader.FIRST | FrameHeader.LAST, 0, 2, honest, false);
                peer.awaitLost(5000);
                assertTrue(f.closeCause(1).getMessage().contains("PACKED stands alone"), f.closeCause(1).getMessage());
            }
            try (RawPeer peer = f.attacker()) {
                peer.fragment(true, false, 100, 50);
                peer.send(FrameHeader.PACKED, 0, 2, honest, false);
                peer.awaitLost(5000);
                assertTrue(f.closeCause(2).getMessage().contains("inside a fragmented frame"),
                        f.closeCause(2).getMessage());
            }
            try (RawPeer peer = f.attacker()) {
                peer.send(FrameHeader.PACKED, 0, 0, new byte[0], false);
                peer.awaitLost(5000);
                assertTrue(f.closeCause(3).getMessage().contains("holds 0 frames"), f.closeCause(3).getMessage());
            }
            f.assertStillServes(100);
        }
    }

    @Test
    void aPeerThatDoesNotStateTheFeatureGetsOneFramePerSend() throws Exception {
        try (FakeFabric fabric = new FakeFabric(); RdmaTransport server = RdmaTransport.create(fabric, strict())) {
            CompletableFuture<RdmaChannel> accepted = new CompletableFuture<>();
            RdmaServer listener = server.listen(Peers.serverAddress(), ch -> {
                accepted.complete(ch);
                return new Peers.Recorder();
            });
            // the raw peer's handshake is the old format: offset 20 is 0
            try (RawPeer old = RawPeer.connect(fabric, listener.localAddress(), RawPeer.honestHandshake())) {
                assertTrue(old.server().readsPacked(), "our side states that it reads packed SENDs");
                RdmaChannel ch = accepted.get(5, TimeUnit.SECONDS);
                for (int i = 0; i < 10; i++) {
                    ch.write(ByteBuffer.wrap(Peers.payload(5, i, 20)), false);
                }
                ch.flush();
                // the accepted channel may still be finishing its side of the connection: writes wait for that
                Peers.await("the ten frames to leave", 5_000, () -> ch.stats().framesSent() == 10);
                TransportStats s = ch.stats();
                assertEquals(10, s.framesSent());
                assertEquals(0, s.framesPacked(), s.toString());
                assertEquals(10, s.sendsPosted(), s.toString());
                // what an operator counts during a rolling upgrade (artemis.rdma.connections.older.peers)
                assertTrue(ch.olderPeer(), "a peer stating no features is an older build");
                ChannelGroupStats group = new ChannelGroupStats();
                group.add(ch);
                assertEquals(1, group.snapshot().olderPeers());
                assertEquals(0, group.snapshot().framesPacked());
                Thread.sleep(20);
                old.poll();
                assertFalse(old.isLost(), "the old peer took every SEND");
            }
        }
    }

    /**
     * A packed payload of {@code total} bytes: each entry of {@code lengths} as an inner length followed by that
     * many bytes (as far as they fit), zero-filled to {@code total}.
     */
    private static byte[] packed(int[] lengths, int total) {
        ByteBuffer b = ByteBuffer.allocate(total);
        for (int length : lengths) {
            if (b.remaining() < 4) {
                break;
            }
            b.putInt(length);
            int n = Math.max(0, Math.min(length, b.remaining()));
            for (int i = 0; i < n; i++) {
                b.put((byte) i);
            }
        }
        return b.array();
    }
}
