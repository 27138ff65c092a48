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
    void theTransportBudgetFailsTheConnectionThatWouldExceedIt() throws Exception {
        TransportConfig config = server().maxReassemblyBytes(256 << 10).reassemblyMemory(256 << 10).build();
        try (HostileServerFixture f = new HostileServerFixture(config);
             RawPeer first = f.attacker();
             RawPeer second = f.attacker()) {
            int payload = first.server().slotSize() - FrameHeader.LENGTH;
            int frame = 200 << 10;
            first.unfinishedFrame(frame, 10); // grows to the whole 200 KiB of the frame
            Peers.await("the first frame's memory", 5000, () -> f.server.reassemblyBudget().used() == frame);
            try {
                second.unfinishedFrame(frame, 8); // its growth passes the 256 KiB the transport may hold
            } catch (FabricException dropped) {
                // the server dropped it part-way: what this test wants
            }
            second.awaitLost(5000);
            String why = f.closeCause(1).getMessage();
            assertTrue(why.contains("reassemblyMemory"), why);
            // the first connection is unharmed and finishes its frame
            for (int off = 10 * payload; off < frame; off += payload) {
                int n = Math.min(payload, frame - off);
                first.fragment(false, off + n == frame, off, n);
            }
            Peers.await("the first frame", 5000, () -> f.accepted.get(0).count() == 1);
            assertEquals(frame, f.accepted.get(0).sizes.get(0));
            assertFalse(first.isLost());
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
