package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.wire.FrameHeader;

/**
 * Issue 10 item 1: a peer cannot pin heap through reassembly. Memory follows what really arrived, is bounded per
 * connection ({@code maxReassemblyBytes}) and per transport ({@code reassemblyMemory}), and an unfinished frame
 * has a deadline ({@code reassemblyTimeout}). A bound exceeded fails that connection only.
 */
class ReassemblyLimitsTest {

    private static TransportConfig.Builder server() {
        return TransportConfig.builder().busyPollMicros(0);
    }

    @Test
    void aFirstFragmentClaimingAHugeFrameCostsOnlyWhatArrived() throws Exception {
        try (HostileServerFixture f = new HostileServerFixture(server().build());
             RawPeer peer = f.attacker()) {
            peer.unfinishedFrame(60 << 20, 1); // 16 KiB sent, 60 MiB claimed
            Peers.await("the fragment to be taken", 5000, () -> f.server.reassemblyBudget().used() > 0);
            long held = f.server.reassemblyBudget().used();
            assertTrue(held <= 16 << 10, "one 16 KiB fragment pinned " + held + " bytes");
            assertFalse(peer.isLost());
        }
    }

    @Test
    void aFrameAboveMaxReassemblyBytesFailsThatConnectionOnly() throws Exception {
        try (HostileServerFixture f = new HostileServerFixture(server().maxReassemblyBytes(256 << 10).build());
             RawPeer peer = f.attacker()) {
            peer.unfinishedFrame(1 << 20, 1);
            peer.awaitLost(5000);
            String why = f.closeCause(0).getMessage();
            assertTrue(why.contains("maxReassemblyBytes"), why);
            assertTrue(why.contains("10.77.0.2"), "the log line names the peer: " + why);
            assertEquals(0, f.server.reassemblyBudget().used());
            f.assertStillServes(100_000);
        }
    }

    @Test
    void theTransportBudgetFailsTheSquatterNotTheConnectionThatAsksNext() throws Exception {
        // issue 23 item 2: the first connection holds most of the budget with a frame it does not finish; the second
        // streams a frame whose growth no longer fits. Before the fair-share rule the refusal landed on the second,
        // whichever it was; now the first, above its share and the older, is failed and the second is served
        TransportConfig config = server().maxReassemblyBytes(256 << 10).reassemblyMemory(256 << 10).build();
        try (HostileServerFixture f = new HostileServerFixture(config);
             RawPeer squatter = f.attacker();
             RawPeer streamer = f.attacker()) {
            int payload = squatter.server().slotSize() - FrameHeader.LENGTH;
            int frame = 200 << 10;
            squatter.unfinishedFrame(frame, 10); // 160 KiB of the frame, and stops there
            Peers.await("the squatter's memory", 5000,
                    () -> f.server.reassemblyBudget().used() >= 10L * payload);
            for (int off = 0; off < frame; off += payload) { // its growth passes the 256 KiB the transport may hold
                int n = Math.min(payload, frame - off);
                streamer.fragment(off == 0, off + n == frame, off == 0 ? frame : off, n);
            }
            Peers.await("the streamer's frame", 5000, () -> f.accepted.get(1).count() == 1);
            assertEquals(frame, f.accepted.get(1).sizes.get(0));
            squatter.awaitLost(5000);
            String why = f.closeCause(0).getMessage();
            assertTrue(why.contains("reassemblyMemory") && why.contains("fair share"), why);
            assertTrue(why.contains("10.77.0.2"), "the log line names the peer: " + why);
            assertFalse(streamer.isLost(), "the connection that asked next is served");
            assertEquals(1, f.server.reassemblyBudget().victims());
            Peers.await("the squatter's memory back", 5000,
                    () -> f.server.reassemblyBudget().used() <= f.server.reassemblyBudget().kept());
            f.assertStillServes(100_000);
        }
    }

    @Test
    void aConnectionAskingBeyondItsShareFailsItselfWhenNoOtherHoldsMore() throws Exception {
        // two connections each at their share: the one that grows past it is the one that fails
        TransportConfig config = server().maxReassemblyBytes(256 << 10).reassemblyMemory(256 << 10).build();
        try (HostileServerFixture f = new HostileServerFixture(config);
             RawPeer first = f.attacker();
             RawPeer second = f.attacker()) {
            int frame = 250 << 10;
            first.unfinishedFrame(frame, 5); // about 80 KiB: within a share of 128 KiB
            Peers.await("the first frame's memory", 5000, () -> f.server.reassemblyBudget().used() >= 64 << 10);
            try {
                second.unfinishedFrame(frame, 15); // grows past what the budget has left, and past its share
            } catch (FabricException dropped) {
                // the server dropped it part-way: what this test wants
            }
            second.awaitLost(5000);
            String why = f.closeCause(1).getMessage();
            assertTrue(why.contains("none holds more than its fair share"), why);
            assertFalse(first.isLost(), "the connection within its share stays");
            assertEquals(0, f.server.reassemblyBudget().victims());
        }
    }

    @Test
    void anUnfinishedFrameTimesOut() throws Exception {
        try (HostileServerFixture f = new HostileServerFixture(
                server().reassemblyTimeout(Duration.ofMillis(300)).build());
             RawPeer peer = f.attacker()) {
            peer.unfinishedFrame(1 << 20, 2);
            peer.awaitLost(5000);
            String why = f.closeCause(0).getMessage();
            assertTrue(why.contains("reassemblyTimeout"), why);
            Peers.await("the reassembly memory back", 5000, () -> f.server.reassemblyBudget().used() == 0);
            f.assertStillServes(50_000);
        }
    }
}
