package dev.artemisrdma.transport.flow;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.Connection;
import dev.artemisrdma.transport.FakeFabric;
import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.stats.TransportStats;

/**
 * A SEND that starts at its buffer's first byte (a whole frame, a first fragment, a pack) carries its frame header
 * in the buffer's headroom and leaves as one scatter-gather entry; fragments to a peer that reads immediate
 * fragments have no in-band header at all (one entry each). In-band later fragments, to an older peer, keep two
 * entries (the bytes before them belong to the fragment before, possibly still in flight). Frames arrive intact
 * either way. Inline SENDs from their buffer's first byte are one entry too: the provider copies each entry at the
 * post, and one is its shortest loop (as ib_send_lat's single entry).
 */
class HeadroomSendTest {

    private static TransportConfig strict() {
        return TransportConfig.builder().rnrRetryCount(0).busyPollMicros(0).build();
    }

    /** Writes one frame of each size, each flushed and received before the next, and checks they arrived intact. */
    private static void sendEachAndCheck(Connection c, int tag, int[] sizes) throws Exception {
        for (int i = 0; i < sizes.length; i++) {
            int n = i;
            c.client.write(ByteBuffer.wrap(Peers.payload(tag, i, sizes[i])), true);
            Peers.await("frame " + i, 5000, () -> c.serverSide.count() == n + 1);
        }
        for (int i = 0; i < sizes.length; i++) {
            assertEquals(Peers.crc(Peers.payload(tag, i, sizes[i])), c.serverSide.crcs.get(i), "frame " + i);
            assertEquals(sizes[i], c.serverSide.sizes.get(i));
        }
    }

    @Test
    void aWholeFrameLeavesAsOneEntryWithItsHeader() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            int[] sizes = {300, 1000, 1024, 4000, 16376};
            sendEachAndCheck(c, 1, sizes);
            // above maxInlineData (256), so none went inline; none needed a second entry
            assertEquals(0, c.fabric.postedSends(2), "SENDs with a separate header entry");
            assertTrue(c.fabric.postedSends(1) >= sizes.length, "one-entry SENDs: " + c.fabric.postedSends(1));
            TransportStats s = c.client.stats();
            assertEquals(0, s.inlineSends() - s.creditFramesSent(), s.toString());
        }
    }

    @Test
    void anInlineFrameLeavesAsOneEntryWithItsHeader() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            int[] sizes = {1, 64, 200, 248};
            sendEachAndCheck(c, 4, sizes);
            TransportStats s = c.client.stats();
            // within maxInlineData (256) with the 8-byte header: every one went inline, as one entry
            assertEquals(sizes.length, s.inlineSends() - s.creditFramesSent(), s.toString());
            assertEquals(0, c.fabric.postedSends(2), "SENDs with a separate header entry");
        }
    }

    @Test
    void fragmentsWithTheirHeaderInImmediateDataAreOneEntryEach() throws Exception {
        TransportConfig small = strict().toBuilder().slotSize(1024).build();
        try (Connection c = new Connection(small, small)) {
            // whole 1 KiB slots, the header in immediate data: 1024 + 1024 + 952, no header entry, no headroom
            c.client.write(ByteBuffer.wrap(Peers.payload(2, 0, 3000)), true);
            Peers.await("the frame", 5000, () -> c.serverSide.count() == 1);
            assertEquals(Peers.crc(Peers.payload(2, 0, 3000)), c.serverSide.crcs.get(0));
            assertEquals(0, c.fabric.postedSends(2), "SENDs with a separate header entry");
            assertEquals(3, c.client.stats().immediateSends());
            // and a frame after it, from a buffer that may sit right behind the fragmented one in its slab
            c.client.write(ByteBuffer.wrap(Peers.payload(2, 1, 600)), true);
            Peers.await("the next frame", 5000, () -> c.serverSide.count() == 2);
            assertEquals(Peers.crc(Peers.payload(2, 1, 600)), c.serverSide.crcs.get(1));
            assertEquals(0, c.fabric.postedSends(2));
        }
    }

    @Test
    void aPackLeavesAsOneEntry() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            for (int i = 0; i < 20; i++) {
                c.client.write(ByteBuffer.wrap(Peers.payload(3, i, 100)), false);
            }
            c.client.flush();
            Peers.await("frames", 5000, () -> c.serverSide.count() == 20);
            for (int i = 0; i < 20; i++) {
                assertEquals(Peers.crc(Peers.payload(3, i, 100)), c.serverSide.crcs.get(i), "frame " + i);
            }
            TransportStats s = c.client.stats();
            assertEquals(1, s.packedSends(), s.toString());
            assertEquals(0, c.fabric.postedSends(2), "20 frames of 104 bytes packed: above inline, one entry");
        }
    }

    @Test
    void sendBuffersKeepTheirHeadroomOutOfTheCallersView() throws Exception {
        try (FakeFabric fabric = new FakeFabric(); BufferPool pool = new BufferPool(fabric.device())) {
            PooledBuffer.Lease a = pool.allocate(256);
            PooledBuffer.Lease b = pool.allocate(256);
            assertEquals(256, a.buffer().capacity(), "the caller sees the size it asked for");
            assertEquals(BufferPool.HEADROOM, a.pooled().headroom().capacity());
            long gap = Math.abs(b.pooled().address() - a.pooled().address());
            assertTrue(gap >= 256 + BufferPool.HEADROOM, "neighbours " + gap + " bytes apart");
            // a caller filling its whole buffer leaves the neighbour's headroom alone
            a.buffer().put(new byte[256]);
            b.pooled().headroom().put(BufferPool.HEADROOM - 1, (byte) 0x5a);
            a.buffer().clear();
            a.buffer().put(new byte[256]);
            assertEquals(0x5a, b.pooled().headroom().get(BufferPool.HEADROOM - 1));
            a.release();
            b.release();
        }
    }
}
