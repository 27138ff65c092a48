package dev.artemisrdma.transport.flow;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.wire.FrameHeader;

class ReassemblerTest {

    private static final int F = 100; // fragment capacity

    /** Splits {@code frame} as the sender does and feeds the fragments in; returns the delivered frame. */
    private static byte[] roundTrip(Reassembler r, byte[] frame) throws FabricException {
        ByteBuffer result = null;
        int off = 0;
        do {
            int n = Math.min(F, frame.length - off);
            boolean first = off == 0;
            boolean last = off + n == frame.length;
            int flags = (first ? FrameHeader.FIRST : 0) | (last ? FrameHeader.LAST : 0);
            ByteBuffer frag = ByteBuffer.wrap(frame, off, n).slice();
            ByteBuffer out = r.accept(frag, flags, first ? frame.length : off);
            if (last) {
                result = out;
            } else {
                assertNull(out);
            }
            off += n;
        } while (off < frame.length);
        byte[] got = new byte[result.remaining()];
        result.get(got);
        r.delivered();
        return got;
    }

    @Test
    void reassemblesEverySizeAroundTheFragmentBoundaries() throws Exception {
        Reassembler r = new Reassembler(1 << 20, 1 << 16, 1 << 30, new ReassemblyBudget(Long.MAX_VALUE));
        for (int size : new int[] {0, 1, F - 1, F, F + 1, 2 * F - 1, 2 * F, 2 * F + 1, 10 * F, 12345, 70000}) {
            byte[] frame = Peers.payload(7, size, size);
            assertArrayEquals(frame, roundTrip(r, frame), "size " + size);
        }
    }

    @Test
    void singleFragmentFrameIsTheSlotItself() throws Exception {
        Reassembler r = new Reassembler(1000, 1000, 1 << 30, new ReassemblyBudget(Long.MAX_VALUE));
        ByteBuffer slot = ByteBuffer.wrap(new byte[] {1, 2, 3});
        assertSame(slot, r.accept(slot, FrameHeader.FIRST | FrameHeader.LAST, 3));
    }

    @Test
    void protocolViolationsAreReported() throws Exception {
        Reassembler r = new Reassembler(1000, 1000, 1 << 30, new ReassemblyBudget(Long.MAX_VALUE));
        ByteBuffer ten = ByteBuffer.allocate(10);
        assertThrows(FabricException.class, () -> r.accept(ten.duplicate(), 0, 0), "continuation without first");
        assertThrows(FabricException.class, () -> r.accept(ten.duplicate(), FrameHeader.FIRST, 2000), "too large");
        assertThrows(FabricException.class,
                () -> r.accept(ten.duplicate(), FrameHeader.FIRST | FrameHeader.LAST, 11), "length mismatch");
        assertNull(r.accept(ten.duplicate(), FrameHeader.FIRST, 25));
        assertTrue(r.inProgress());
        FabricException e = assertThrows(FabricException.class, () -> r.accept(ten.duplicate(), 0, 5));
        assertTrue(e.getMessage().contains("offset 5"), e.getMessage());
        Reassembler r2 = new Reassembler(1000, 1000, 1 << 30, new ReassemblyBudget(Long.MAX_VALUE));
        assertNull(r2.accept(ten.duplicate(), FrameHeader.FIRST, 25));
        assertThrows(FabricException.class, () -> r2.accept(ten.duplicate(), FrameHeader.FIRST, 25),
                "first inside a frame");
        Reassembler r3 = new Reassembler(1000, 1000, 1 << 30, new ReassemblyBudget(Long.MAX_VALUE));
        assertNull(r3.accept(ten.duplicate(), FrameHeader.FIRST, 25));
        assertThrows(FabricException.class, () -> r3.accept(ten.duplicate(), FrameHeader.LAST, 10),
                "last fragment short");
    }

    @Test
    void memoryFollowsWhatArrivedAndEmptyFragmentsAreRefused() throws Exception {
        ReassemblyBudget budget = new ReassemblyBudget(1 << 30);
        Reassembler r = new Reassembler(64 << 20, 4 << 20, 64 << 20, budget);
        ByteBuffer fragment = ByteBuffer.allocate(F);
        assertNull(r.accept(fragment.duplicate(), FrameHeader.FIRST, 60 << 20)); // claims 60 MiB, brings 100 bytes
        assertTrue(budget.used() <= 4096, "reserved " + budget.used());
        FabricException e = assertThrows(FabricException.class, () -> r.accept(ByteBuffer.allocate(0), 0, F));
        assertTrue(e.getMessage().contains("without payload"), e.getMessage());
        Reassembler fresh = new Reassembler(1000, 1000, 1000, budget);
        assertThrows(FabricException.class, () -> fresh.accept(ByteBuffer.allocate(0), FrameHeader.FIRST, 25));
        r.release();
        assertEquals(0, budget.used());
    }

    @Test
    void keptBuffersAreDroppedWhenTheBudgetRunsHigh() throws Exception {
        ReassemblyBudget budget = new ReassemblyBudget(3 * F);
        Reassembler r = new Reassembler(1 << 20, 1 << 20, 3 * F, budget);
        roundTrip(r, Peers.payload(1, 0, 2 * F)); // holds 2F of 3F after delivery: above half, so dropped
        assertEquals(0, budget.used());
        ReassemblyBudget roomy = new ReassemblyBudget(1 << 20);
        Reassembler kept = new Reassembler(1 << 20, 1 << 20, 1 << 20, roomy);
        roundTrip(kept, Peers.payload(1, 0, 2 * F));
        assertTrue(roomy.used() > 0, "a small buffer is kept for the next frame while the budget is low");
    }

    @Test
    void keptBuffersTogetherHoldAtMostAnEighthOfTheBudget() throws Exception {
        // before: each connection kept its buffer while the budget was at most half used, so idle connections
        // could hold half of it between frames
        ReassemblyBudget budget = new ReassemblyBudget(16_000);
        for (int c = 0; c < 12; c++) {
            Reassembler r = new Reassembler(1 << 20, 1 << 20, 1 << 20, budget);
            roundTrip(r, Peers.payload(1, c, 3 * F)); // a buffer of 300 bytes each
        }
        assertTrue(budget.kept() > 0, "small buffers are kept while there is room");
        assertTrue(budget.kept() <= 16_000 / 8, "kept " + budget.kept());
        assertEquals(budget.kept(), budget.used(), "nothing but kept buffers is held");
    }

    @Test
    void theSquatterAboveItsShareIsCondemnedAndTheAskerServedAtOnce() throws Exception {
        ReassemblyBudget budget = new ReassemblyBudget(1000);
        Reassembler squatter = new Reassembler(1 << 20, 0, 1 << 20, budget);
        Reassembler asker = new Reassembler(1 << 20, 0, 1 << 20, budget);
        assertNull(squatter.accept(ByteBuffer.allocate(F), FrameHeader.FIRST, 600)); // reserves its 600 bytes
        assertNull(asker.accept(ByteBuffer.allocate(F), FrameHeader.FIRST, 900)); // 900 more do not fit
        // the squatter (600 of a fair share of 500) is condemned; the asker got its room by the overdraft
        assertEquals(1, budget.victims());
        assertTrue(squatter.condemnation().contains("fair share"), squatter.condemnation());
        assertNull(asker.condemnation());
        assertEquals(1500, budget.used());
        FabricException e = assertThrows(FabricException.class,
                () -> squatter.accept(ByteBuffer.allocate(F), 0, F));
        assertTrue(e.getMessage().contains("reassemblyMemory"), e.getMessage());
        squatter.release(); // its loop fails it: the memory and the overdraft go back
        assertEquals(900, budget.used());
        // the overdraft ended with the squatter's memory: 200 more bytes beside the asker's 900 do not fit
        assertFalse(budget.tryReserve(200));
        for (int off = F; off < 900; off += F) {
            ByteBuffer out = asker.accept(ByteBuffer.allocate(F), off + F == 900 ? FrameHeader.LAST : 0, off);
            assertEquals(off + F == 900, out != null, "offset " + off);
        }
        asker.delivered();
        assertEquals(0, budget.used());
    }

    @Test
    void aFirstFragmentRefusedRoomLeavesNoHolderBehind() throws Exception {
        // the connection fails and is released: it must no longer count among those reassembling, where it would
        // shrink every later fair share
        ReassemblyBudget budget = new ReassemblyBudget(500);
        Reassembler r = new Reassembler(1 << 20, 0, 1 << 20, budget);
        assertThrows(FabricException.class, () -> r.accept(ByteBuffer.allocate(F), FrameHeader.FIRST, 900));
        r.release();
        assertEquals(0, budget.holders());
        assertEquals(0, budget.used());
    }

    /** Feeds the fragments of a frame of {@code length} bytes from offset {@code from} up to {@code to}. */
    private static ByteBuffer feed(Reassembler r, int length, int from, int to) throws FabricException {
        ByteBuffer out = null;
        for (int off = from; off < to; off += F) {
            int n = Math.min(F, to - off);
            int flags = (off == 0 ? FrameHeader.FIRST : 0) | (off + n == length ? FrameHeader.LAST : 0);
            out = r.accept(ByteBuffer.allocate(n), flags, off == 0 ? length : off);
        }
        return out;
    }

    @Test
    void buffersKeptBetweenFramesGiveWayToAFrameInProgress() throws Exception {
        // issue 37 hole 2, scaled down: eight idle connections keep their buffers between frames (an eighth of the
        // budget), seven squatters sit on all but one byte of frames of exactly their share; before, the kept
        // buffers went back only on their own connection's next delivery, and nobody's fragmented frame fitted:
        // "none holds more than its fair share"
        ReassemblyBudget budget = new ReassemblyBudget(8000);
        for (int c = 0; c < 8; c++) {
            roundTrip(new Reassembler(1 << 20, 1 << 20, 1 << 20, budget), Peers.payload(1, c, 125));
        }
        assertEquals(1000, budget.kept(), "the idle connections keep an eighth of the budget between frames");
        List<Reassembler> squatters = new ArrayList<>();
        for (int c = 0; c < 7; c++) {
            Reassembler squatter = new Reassembler(1 << 20, 0, 1 << 20, budget);
            assertNull(feed(squatter, 1000, 0, 999)); // all but one byte: exactly the share of 1000 among 8
            squatters.add(squatter);
        }
        assertEquals(8000, budget.used(), "the budget is full");
        Reassembler asker = new Reassembler(1 << 20, 0, 1 << 20, budget);
        assertNull(feed(asker, 500, 0, 400), "the kept buffers are dropped for a frame in progress");
        assertNotNull(feed(asker, 500, 400, 500));
        asker.delivered();
        assertEquals(0, budget.victims(), "nobody's frame failed for it");
        assertTrue(budget.kept() <= 500, "kept " + budget.kept());
        for (Reassembler squatter : squatters) {
            assertNull(squatter.condemnation(), "below or at their share, young squatters are not failed");
        }
    }

    @Test
    void aFrameSittingOnItsWholeShareForASecondGivesWayToOneThatStreams() throws Exception {
        // issue 37 hole 2: seven squatters each hold exactly their share and finish every frame inside
        // reassemblyTimeout (29 s), then begin again. Before, none was ever failed (none held strictly more than its
        // share) and a streaming frame above the share failed every time
        AtomicLong clock = new AtomicLong();
        ReassemblyBudget budget = new ReassemblyBudget(8000, clock::get);
        List<Reassembler> squatters = new ArrayList<>();
        for (int c = 0; c < 7; c++) {
            Reassembler squatter = new Reassembler(1 << 20, 0, 1 << 20, budget);
            assertNull(feed(squatter, 1000, 0, 999));
            squatters.add(squatter);
            clock.addAndGet(TimeUnit.MILLISECONDS.toNanos(1));
        }
        clock.addAndGet(TimeUnit.SECONDS.toNanos(29));
        for (Reassembler squatter : squatters) { // the last byte inside reassemblyTimeout, and again
            assertNotNull(feed(squatter, 1000, 999, 1000));
            squatter.delivered();
            assertNull(feed(squatter, 1000, 0, 999));
            clock.addAndGet(TimeUnit.MILLISECONDS.toNanos(1));
        }
        // a frame that began just now holding its share is a frame that streams: the asker beyond its share fails
        Reassembler early = new Reassembler(1 << 20, 0, 1 << 20, budget);
        FabricException e = assertThrows(FabricException.class, () -> feed(early, 2000, 0, 100));
        assertTrue(e.getMessage().contains("fair share"), e.getMessage());
        early.release();
        assertEquals(0, budget.victims());

        clock.addAndGet(TimeUnit.MILLISECONDS.toNanos(1500)); // they sat on their whole share for 1.5 s
        Reassembler streamer = new Reassembler(1 << 20, 0, 1 << 20, budget);
        assertNull(feed(streamer, 2000, 0, 100), "served at once");
        assertEquals(1, budget.victims());
        Reassembler victim = squatters.get(0);
        assertTrue(victim.condemnation() != null && victim.condemnation().contains("fair share"),
                "the squatter whose frame began the longest ago: " + victim.condemnation());
        for (int c = 1; c < 7; c++) {
            assertNull(squatters.get(c).condemnation(), "one victim is enough");
        }
        assertThrows(FabricException.class, () -> feed(victim, 1000, 999, 1000));
        victim.release(); // its loop fails it: its memory and the overdraft go back
        assertNotNull(feed(streamer, 2000, 100, 2000));
        streamer.delivered();
        assertEquals(6000, budget.used(), "the six other squatters' frames");
    }
}
