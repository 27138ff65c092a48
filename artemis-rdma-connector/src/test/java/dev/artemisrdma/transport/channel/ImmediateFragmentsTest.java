package dev.artemisrdma.transport.channel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.Random;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.Connection;
import dev.artemisrdma.transport.FakeFabric;
import dev.artemisrdma.transport.HostileServerFixture;
import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.RawPeer;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.stats.TransportStats;
import dev.artemisrdma.transport.wire.FrameHeader;
import dev.artemisrdma.transport.wire.Handshake;
import dev.artemisrdma.transport.wire.ImmediateHeader;

/**
 * Issue 11, 64 KiB rate: a frame larger than a slot goes in fragments of a whole slot with the header in the SEND's
 * immediate data (a 64 KiB frame in 4 SENDs of 16 KiB, as many packets as one SEND of it), only to a peer that reads
 * them; what a peer puts in immediate data is judged like an in-band header and fails its connection only.
 */
class ImmediateFragmentsTest {

    private static final int SLOT = 16 << 10;

    private static TransportConfig strict() {
        return TransportConfig.builder().rnrRetryCount(0).busyPollMicros(0).build();
    }

    private static long dataSends(TransportStats s) {
        return s.sendsPosted() - s.creditFramesSent();
    }

    @Test
    void aFrameOfFourSlotsLeavesAsFourWholeSlotSends() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            int[] sizes = {64 << 10, SLOT, SLOT + 1, SLOT - FrameHeader.LENGTH, 3 * SLOT - 5};
            // SENDs each needs: a whole slot of payload per SEND; a frame that fits behind an in-band header has one
            int[] sends = {4, 1, 2, 1, 3};
            int[] immediate = {4, 1, 2, 0, 3};
            writeEachAndCountSends(c, 11, sizes, sends, immediate);
        }
    }

    /**
     * Writes frames of {@code sizes}, one at a time, each arriving intact, and checks the data SENDs each took and
     * how many of them carried their header in the immediate data.
     */
    private static void writeEachAndCountSends(Connection c, int seed, int[] sizes, int[] sends, int[] immediate)
            throws Exception {
        for (int i = 0; i < sizes.length; i++) {
            TransportStats before = c.client.stats();
            byte[] frame = Peers.payload(seed, i, sizes[i]);
            c.client.write(ByteBuffer.wrap(frame), true);
            int n = i + 1;
            Peers.await("frame " + i, 5000, () -> c.serverSide.count() == n);
            assertEquals(Peers.crc(frame), c.serverSide.crcs.get(i), "frame " + i + " of " + sizes[i] + " bytes");
            TransportStats after = c.client.stats();
            assertEquals(sends[i], dataSends(after) - dataSends(before), sizes[i] + " bytes: " + after);
            assertEquals(immediate[i], after.immediateSends() - before.immediateSends(), sizes[i] + " bytes: "
                    + after);
        }
    }

    /**
     * Issue 24: at RoCE MTU 1024 (the fake's port, as on 1500-byte Ethernet) a 1 KiB frame must stay one packet, as
     * ib_send_lat's 1 KiB SEND is: where the in-band header would push a SEND past a multiple of the MTU, the frame
     * goes as one SEND with its header in the immediate data; where it would not, in band as before.
     */
    @Test
    void aFrameWhoseHeaderWouldCostAPacketGoesWithItsHeaderInImmediateData() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            int[] sizes = {1024, 1017, 1016, 2048, 1000, 2040, 3 * 1024 + 1020, 1};
            int[] sends = {1, 1, 1, 1, 1, 1, 1, 1}; // each one SEND: none is larger than a slot
            int[] immediate = {1, 1, 0, 1, 0, 0, 1, 0};
            writeEachAndCountSends(c, 24, sizes, sends, immediate);
            assertEquals(0, c.fabric.violations().size(), c.fabric.violations().toString());
        }
    }

    /**
     * Issue 24: a request/reply of 1 KiB frames at RoCE MTU 1024, each frame one SEND with its header in the immediate
     * data: as whole frames (handshake feature 4) they return the credit the reply owes, as the in-band header would,
     * so no credit frame goes either way. (As first fragments, which return none, the lab's A/B took a credit frame per
     * three SENDs and stalled on the window between them.)
     */
    @Test
    void wholeImmediateFramesReturnCreditSoARequestReplyNeedsNoCreditFrame() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            int rounds = 300;
            for (int i = 0; i < rounds; i++) {
                int n = i + 1;
                c.client.write(ByteBuffer.wrap(Peers.payload(25, i, 1024)), true);
                Peers.await("request " + i, 5000, () -> c.serverSide.count() == n);
                c.serverChannel.write(ByteBuffer.wrap(Peers.payload(26, i, 1024)), true);
                Peers.await("reply " + i, 5000, () -> c.clientSide.count() == n);
            }
            for (int i = 0; i < rounds; i++) {
                assertEquals(Peers.crc(Peers.payload(25, i, 1024)), c.serverSide.crcs.get(i), "request " + i);
                assertEquals(Peers.crc(Peers.payload(26, i, 1024)), c.clientSide.crcs.get(i), "reply " + i);
            }
            for (RdmaChannel ch : new RdmaChannel[] {c.client, c.serverChannel}) {
                TransportStats s = ch.stats();
                assertEquals(rounds, s.immediateSends(), "every frame one immediate SEND: " + s);
                assertEquals(0, s.creditFramesSent(), "the frames returned every credit: " + s);
                assertEquals(0, s.creditStalls(), s.toString());
            }
            assertEquals(0, c.fabric.violations().size(), c.fabric.violations().toString());
        }
    }

    /**
     * The whole-frame form goes only to a peer that states feature 4: one that states feature 2 alone (a build from
     * before it) gets the frame as an immediate first fragment, which it reads as the whole frame.
     */
    @Test
    void aWholeImmediateFrameGoesOnlyToAPeerThatStatesIt() throws Exception {
        int older = Handshake.KNOWN_FEATURES & ~Handshake.FEATURE_IMMEDIATE_WHOLE; // what 0.1.0 states
        for (boolean statesWhole : new boolean[] {false, true}) {
            int features = older | (statesWhole ? Handshake.FEATURE_IMMEDIATE_WHOLE : 0);
            // 8 receives, reposted one at a time (receiveSlots / 8): the request's credit is owed at once
            try (HostileServerFixture f = new HostileServerFixture(strict().toBuilder().sharedReceiveQueue(false)
                    .receiveSlots(8).build());
                 RawPeer peer = f.attacker(Handshake.encodeConnect(new Handshake.Params(RawPeer.SLOT,
                         RawPeer.RECEIVES, 64 << 20, features, RawPeer.RECEIVES)))) {
                // one frame to the server: its reply owes the credit of that receive
                peer.send(FrameHeader.FIRST | FrameHeader.LAST, 0, 10, new byte[10], false);
                Peers.await("the accepted channel's frame", 5000,
                        () -> f.accepted.size() == 1 && f.accepted.get(0).count() == 1);
                RdmaChannel ch = f.channels.get(0);
                ch.write(ByteBuffer.wrap(new byte[1024]), true);
                awaitReceived("the reply", peer, 1);
                RawPeer.Received r = peer.received().get(0);
                assertEquals(1024, r.byteLength(), "the header is not in band");
                int immediate = (int) r.immediate();
                if (statesWhole) {
                    assertTrue(ImmediateHeader.isWhole(immediate), Integer.toHexString(immediate));
                    assertEquals(1, ImmediateHeader.credits(immediate), "returns the receive the request took");
                } else {
                    assertTrue(ImmediateHeader.isFirst(immediate), Integer.toHexString(immediate));
                    assertEquals(1024, ImmediateHeader.frameLength(immediate));
                }
                assertFalse(peer.isLost());
            }
        }
    }

    @Test
    void largeFramesBothWaysThroughASmallWindowArriveWholeAndInOrder() throws Exception {
        // a window of 4 per-connection receives: the first fragment often meets the last spare credit and goes with
        // its header in band (it must return credit), its continuations in immediate data; both kinds interleave
        TransportConfig small = strict().toBuilder().receiveSlots(4).sharedReceiveQueue(false).build();
        try (Connection c = new Connection(small, small)) {
            Random random = new Random(42);
            int frames = 200;
            int[] sizes = new int[frames];
            for (int i = 0; i < frames; i++) {
                sizes[i] = random.nextInt(4) == 0 ? 1 + random.nextInt(200) : SLOT - 16 + random.nextInt(5 * SLOT);
            }
            Thread back = new Thread(() -> {
                try {
                    for (int i = 0; i < frames; i++) {
                        c.serverChannel.write(ByteBuffer.wrap(Peers.payload(13, i, sizes[i])), true);
                    }
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            back.start();
            for (int i = 0; i < frames; i++) {
                c.client.write(ByteBuffer.wrap(Peers.payload(12, i, sizes[i])), true);
            }
            back.join(10_000);
            Peers.await("both streams", 10_000, () -> c.serverSide.count() == frames && c.clientSide.count() == frames);
            for (int i = 0; i < frames; i++) {
                assertEquals(Peers.crc(Peers.payload(12, i, sizes[i])), c.serverSide.crcs.get(i), "to server " + i);
                assertEquals(Peers.crc(Peers.payload(13, i, sizes[i])), c.clientSide.crcs.get(i), "to client " + i);
            }
            TransportStats s = c.client.stats();
            assertTrue(s.immediateSends() > frames, s.toString());
            assertEquals(0, c.fabric.violations().size(), "RNR or any other verbs rule broken: "
                    + c.fabric.violations());
        }
    }

    @Test
    void aFirstFragmentOnTheLastCreditGoesInBandAndTheRestInImmediateData() throws Exception {
        TransportConfig four = strict().toBuilder().receiveSlots(4).sharedReceiveQueue(false).build();
        try (Connection c = new Connection(four, four)) {
            RdmaChannelImpl client = (RdmaChannelImpl) c.client;
            c.serverChannel.setAutoRead(false); // the server returns no credit: the client's window runs down
            int sent = 0;
            while (credits(client) > 1) {
                c.client.write(ByteBuffer.wrap(Peers.payload(14, sent, 100)), true);
                int n = ++sent;
                Peers.await("small frame " + n, 5000, () -> c.client.stats().framesSent() == n);
            }
            // the large frame waits: the last credit goes only with a SEND that returns credit, and none is owed
            byte[] large = Peers.payload(15, 0, 3 * SLOT);
            c.client.write(ByteBuffer.wrap(large), true);
            Thread.sleep(20);
            assertEquals(1, credits(client), client.debugState());
            assertEquals(sent, c.client.stats().framesSent());
            // the server writes: the client owes credit, its first fragment may take the last credit and return it,
            // so it goes in band (an immediate first fragment has no room for credit)
            c.serverChannel.write(ByteBuffer.wrap(new byte[10]), true);
            Peers.await("the first fragment", 5000, () -> credits(client) == 0);
            TransportStats first = c.client.stats();
            assertEquals(0, first.immediateSends(), "the first fragment went in band: " + first);
            c.serverChannel.setAutoRead(true);
            int total = sent + 1;
            Peers.await("the large frame", 5000, () -> c.serverSide.count() == total);
            assertEquals(Peers.crc(large), c.serverSide.crcs.get(sent));
            // 16,376 bytes went in band: the other 32,776 are two whole slots and 8 bytes, in immediate data
            assertEquals(3, c.client.stats().immediateSends(), c.client.stats().toString());
        }
    }

    private static int credits(RdmaChannelImpl channel) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile(" credits=(\\d+) ").matcher(
                " " + channel.debugState());
        assertTrue(m.find(), channel.debugState());
        return Integer.parseInt(m.group(1));
    }

    @Test
    void aDeviceWithoutImmediateDataKeepsHeadersInBand() throws Exception {
        FakeFabric iwarp = new FakeFabric();
        iwarp.withoutImmediateData(); // as siw: SEND_WITH_IMM would be an invalid opcode
        try (Connection c = new Connection(iwarp, strict(), strict())) {
            byte[] frame = Peers.payload(16, 0, 64 << 10);
            c.client.write(ByteBuffer.wrap(frame), true);
            Peers.await("the frame", 5000, () -> c.serverSide.count() == 1);
            assertEquals(Peers.crc(frame), c.serverSide.crcs.get(0));
            TransportStats s = c.client.stats();
            assertEquals(0, s.immediateSends(), s.toString());
            assertEquals(5, dataSends(s), "16,376 bytes a fragment behind in-band headers: " + s);
        }
    }

    @Test
    void aPeerThatDoesNotStateTheFeatureGetsHeadersInBand() throws Exception {
        try (HostileServerFixture f = new HostileServerFixture(strict());
             RawPeer old = f.attacker()) { // its handshake is the old format: offset 20 is 0
            assertTrue(old.server().readsImmediateFragments(), "our side states that it reads them");
            Peers.await("the accepted channel", 5000, () -> f.channels.size() == 1);
            RdmaChannel ch = f.channels.get(0);
            ch.write(ByteBuffer.wrap(new byte[64 << 10]), true);
            Peers.await("the frame to leave", 5_000, () -> ch.stats().framesSent() == 1);
            awaitReceived("its SENDs", old, 5);
            for (RawPeer.Received r : old.received()) {
                assertEquals(Completions.NO_IMMEDIATE, r.immediate(), "no immediate data to an older peer");
            }
            assertEquals(0, ch.stats().immediateSends());
            // the first fragment's header in the buffer's headroom, the later ones' in the ring: two entries
            assertEquals(4, f.fabric.postedSends(2), "in-band later fragments");
            assertFalse(old.isLost());
        }
    }

    @Test
    void aContinuationWithoutAFirstFragmentFailsThatConnectionOnly() throws Exception {
        assertFailsOnlyItsConnection("continuation fragment without a first one",
                ImmediateHeader.continuation(true, 0, 0), 100);
    }

    @Test
    void reservedImmediateBitsFailThatConnectionOnly() throws Exception {
        assertFailsOnlyItsConnection("reserved bits", ImmediateHeader.first(3 * SLOT), SLOT,
                ImmediateHeader.continuation(false, 0, 0) | 0x0100_0000, SLOT);
    }

    @Test
    void aWholeImmediateFrameThatIsNotLastFailsThatConnectionOnly() throws Exception {
        assertFailsOnlyItsConnection("says a whole frame but not its last fragment",
                ImmediateHeader.whole(0, 0) & ~(1 << 30), 100); // WHOLE without LAST
    }

    @Test
    void aWholeImmediateFrameInsideAFragmentedOneFailsThatConnectionOnly() throws Exception {
        assertFailsOnlyItsConnection("a new frame began inside a fragmented one", ImmediateHeader.first(3 * SLOT),
                SLOT, ImmediateHeader.whole(0, 0), 100);
    }

    @Test
    void aWholeImmediateFrameGrantingMoreThanTheWindowFailsThatConnectionOnly() throws Exception {
        // its credits go through the same window bound as an in-band header's (PeerValidationTest)
        assertFailsOnlyItsConnection("receives it advertised", ImmediateHeader.whole(0, FrameHeader.MAX_CREDITS), 100);
    }

    /** Polls {@code peer} until it has received {@code sends} SENDs. */
    private static void awaitReceived(String what, RawPeer peer, int sends) throws Exception {
        Peers.await(what + " to arrive", 5_000, () -> {
            try {
                peer.poll();
            } catch (FabricException e) {
                throw new AssertionError(e);
            }
            return peer.received().size() == sends;
        });
    }

    /**
     * A raw peer sends SENDs of {@code immediateAndSize} (immediate data, payload bytes, pairs): its connection alone
     * fails with a cause that names {@code why} and the peer, a frame it left unfinished gives its memory back, and
     * the server serves a well-behaved client on.
     */
    private static void assertFailsOnlyItsConnection(String why, int... immediateAndSize) throws Exception {
        try (HostileServerFixture f = new HostileServerFixture(strict());
             RawPeer peer = f.attacker()) {
            for (int i = 0; i < immediateAndSize.length; i += 2) {
                peer.sendImmediate(immediateAndSize[i], immediateAndSize[i + 1]);
            }
            peer.awaitLost(5000);
            String cause = f.closeCause(0).getMessage();
            assertTrue(cause.contains(why), cause);
            assertTrue(cause.contains("10.77.0.2"), "names the peer: " + cause);
            assertEquals(0, f.server.reassemblyBudget().used(), "an unfinished frame's memory went back");
            f.assertStillServes(100_000);
        }
    }

    @Test
    void aWholeImmediateFrameFromARawPeerIsDeliveredAndItsCreditsCount() throws Exception {
        try (HostileServerFixture f = new HostileServerFixture(strict().toBuilder().sharedReceiveQueue(false).build());
             RawPeer peer = f.attacker()) {
            peer.sendImmediate(ImmediateHeader.whole(0, 0), 100);
            peer.sendImmediate(ImmediateHeader.whole(0, 0), SLOT); // a whole slot: no room for an in-band header
            Peers.await("the frames", 5000, () -> f.accepted.size() == 1 && f.accepted.get(0).count() == 2);
            assertEquals(java.util.List.of(100, SLOT), f.accepted.get(0).sizes);
            assertFalse(peer.isLost());
        }
    }

    @Test
    void anImmediateFirstFragmentIsBoundedLikeAnInBandOne() throws Exception {
        try (HostileServerFixture f = new HostileServerFixture(strict().toBuilder().maxFrameSize(1 << 20).build());
             RawPeer peer = f.attacker()) {
            peer.sendImmediate(ImmediateHeader.first(Integer.MAX_VALUE), SLOT);
            peer.awaitLost(5000);
            String why = f.closeCause(0).getMessage();
            assertTrue(why.contains("exceeds the maximum frame size"), why);
            assertEquals(0, f.server.reassemblyBudget().used());
            f.assertStillServes(100_000);
        }
    }

    @Test
    void anImmediateFrameFromARawPeerIsPutTogether() throws Exception {
        try (HostileServerFixture f = new HostileServerFixture(strict());
             RawPeer peer = f.attacker()) {
            int frame = 2 * SLOT + 10;
            peer.sendImmediate(ImmediateHeader.first(frame), SLOT);
            peer.sendImmediate(ImmediateHeader.continuation(false, 0, 0), SLOT);
            peer.sendImmediate(ImmediateHeader.continuation(true, 0, 0), 10);
            Peers.await("the frame", 5000, () -> f.accepted.size() == 1 && f.accepted.get(0).count() == 1);
            assertEquals(frame, f.accepted.get(0).sizes.get(0));
            assertFalse(peer.isLost());
        }
    }
}
