package dev.artemisrdma.transport.flow;

import java.nio.ByteBuffer;

import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.wire.FrameHeader;

/**
 * Puts fragmented frames back together. A frame of one fragment is handed on as the receive slot itself (no
 * copy); a fragmented one is copied, fragment by fragment, into a heap buffer that is lent to the budget for the next
 * frame unless it grew beyond {@code retainBytes} (the budget may drop it meanwhile when frames in progress need the
 * room). Checks that fragments arrive as the protocol says they must (RC delivers in order, so anything else is a
 * peer bug). Used by the completion loop thread only.
 *
 * <p>Nothing a peer claims costs memory before it arrives: a first fragment's frame length is only checked against
 * the bounds, and the buffer grows (by half, never beyond the frame) as fragments really come. What it holds counts
 * against {@code maxReassemblyBytes} for the connection and the transport's {@link ReassemblyBudget}, whose
 * fair-share rule may condemn this connection when it squats on more than its share ({@link #condemnation()}, which
 * the loop's tick turns into a failure); an unfinished frame is timed from its first fragment ({@link #startedAt()}),
 * so the completion loop can enforce a deadline. A heap that cannot hold a buffer fails this connection only.
 */
public final class Reassembler {

    /** The smallest allocation for a fragmented frame (unless the frame is smaller): what came, rounded up. */
    private static final int MIN_ALLOCATION = 4 << 10;

    private final int maxFrameSize;
    private final int retainBytes;
    private final int maxBytes;
    private final ReassemblyBudget budget;
    private ByteBuffer frame;
    private int expected = -1;
    private volatile long startedAt;
    /** Bytes reserved for {@link #frame}: read by other loops' threads when the budget looks for a squatter. */
    private volatile int held;
    /** Why the budget condemned this connection; null while it is not. Set and cleared under the budget's lock. */
    private volatile String condemnedWhy;
    /** What it held when condemned: the budget's overdraft on its behalf. Guarded by the budget's lock. */
    private long condemnedHeld;

    public Reassembler(int maxFrameSize, int retainBytes, int maxBytes, ReassemblyBudget budget) {
        this.maxFrameSize = maxFrameSize;
        this.retainBytes = retainBytes;
        this.maxBytes = maxBytes;
        this.budget = budget;
    }

    /** A bound of ours was exceeded (not a malformed frame): the message names the key that raises it. */
    static final class LimitExceededException extends FabricException {
        LimitExceededException(String message) {
            super(message);
        }
    }

    /**
     * Takes one fragment ({@code payload} from position to limit) and returns the whole frame when this was its
     * last fragment, else null. The returned buffer is valid until the next call or {@link #delivered()}.
     */
    public ByteBuffer accept(ByteBuffer payload, int flags, int lengthOrOffset) throws FabricException {
        boolean first = (flags & FrameHeader.FIRST) != 0;
        boolean last = (flags & FrameHeader.LAST) != 0;
        int n = payload.remaining();
        if (first) {
            if (expected >= 0) {
                throw new FabricException("protocol error: a new frame began inside a fragmented one");
            }
            if (lengthOrOffset < 0 || lengthOrOffset > maxFrameSize) {
                throw new FabricException("protocol error: frame of " + lengthOrOffset
                        + " bytes exceeds the maximum frame size " + maxFrameSize);
            }
            if (last) {
                if (n != lengthOrOffset) {
                    throw new FabricException("protocol error: frame says " + lengthOrOffset + " bytes, carries " + n);
                }
                return payload;
            }
            if (n >= lengthOrOffset) {
                throw new FabricException("protocol error: first fragment holds the whole frame but is not last");
            }
            if (n == 0) {
                throw new FabricException("protocol error: a first fragment without payload");
            }
            if (lengthOrOffset > maxBytes) {
                throw new LimitExceededException("a fragmented frame of " + lengthOrOffset
                        + " bytes exceeds maxReassemblyBytes (" + maxBytes + "); raise maxReassemblyBytes to receive it");
            }
            startedAt = budget.now(); // the clock is read for fragmented frames only
            ByteBuffer lent = budget.holding(this); // the buffer kept since the last frame, unless it was dropped
            if (lent != null) {
                frame = lent;
                held = lent.capacity();
            }
            ensureRoom(Math.min(lengthOrOffset, Math.max(n, MIN_ALLOCATION)), lengthOrOffset);
            frame.clear();
            expected = lengthOrOffset;
            frame.put(payload);
            return null;
        }
        if (expected < 0) {
            throw new FabricException("protocol error: continuation fragment without a first one");
        }
        failIfCondemned();
        if (lengthOrOffset != frame.position()) {
            throw new FabricException("protocol error: fragment at offset " + lengthOrOffset + ", expected "
                    + frame.position());
        }
        int left = expected - frame.position();
        if (n > left || (last && n != left) || (!last && n == left)) {
            throw new FabricException("protocol error: fragments do not add up to the frame length " + expected);
        }
        if (n == 0) {
            throw new FabricException("protocol error: a continuation fragment without payload"); // endless ones
        }
        if (n > frame.remaining()) {
            ensureRoom(frame.position() + n, expected);
        }
        frame.put(payload);
        if (!last) {
            return null;
        }
        frame.flip();
        expected = -1;
        budget.notHolding(this); // a frame that finished is no squatter: a condemnation is lifted
        return frame;
    }

    /**
     * Makes the buffer hold at least {@code needed} bytes: grows it by half (at least to {@code needed}, at most to
     * the frame's length), keeps what it holds, and charges the growth to the budget first; when the budget is short
     * its fair-share rule may condemn another connection to make room (see {@link ReassemblyBudget}).
     */
    private void ensureRoom(int needed, int frameLength) throws FabricException {
        failIfCondemned();
        int have = frame == null ? 0 : frame.capacity();
        if (have >= needed) {
            return;
        }
        int grown = (int) Math.min(frameLength, Math.max(needed, have + (long) have / 2));
        int more = grown - have;
        // kept buffers are a cache: they go before anyone's frame does
        if (!budget.tryReserve(more) && !(budget.reclaimKept(more) && budget.tryReserve(more))
                && !(budget.condemnSquatter(this) && budget.tryReserve(more))) {
            throw new LimitExceededException("reassembly would need " + more + " more bytes of heap, but the "
                    + "transport's connections already hold " + budget.used() + " of reassemblyMemory ("
                    + budget.limit() + ") and none holds more than its fair share, or its whole share for over a "
                    + "second: raise reassemblyMemory");
        }
        ByteBuffer bigger;
        try {
            bigger = ByteBuffer.allocate(grown);
        } catch (OutOfMemoryError e) {
            // the heap, not our budget, ran out: this connection fails, its loop and the others go on
            budget.release(more);
            throw new LimitExceededException("the JVM heap could not hold a reassembly buffer of " + grown
                    + " bytes (" + e.getMessage() + "); give the JVM more heap (-Xmx) or lower reassemblyMemory");
        }
        if (frame != null) {
            frame.flip();
            bigger.put(frame);
        }
        frame = bigger;
        held = grown;
    }

    /**
     * The handler is done with the last frame returned. Lends the buffer to the budget for the next fragmented frame
     * only while it is small ({@code retainBytes}) and the budget takes it (see {@link ReassemblyBudget#keep});
     * otherwise drops it. Either way this connection holds nothing between frames: a kept buffer is the budget's to
     * drop when frames in progress need room, so it never waits for this connection's next delivery.
     */
    public void delivered() {
        if (frame == null || expected >= 0) {
            return;
        }
        if (frame.capacity() > retainBytes || !budget.keep(this, frame)) {
            budget.release(frame.capacity());
        }
        frame = null;
        held = 0;
    }

    /** The connection is gone: whatever is held, or lent to the budget, goes back to it. */
    public void release() {
        if (frame != null) {
            budget.release(frame.capacity());
            frame = null;
            held = 0;
        }
        ByteBuffer lent = budget.takeKept(this);
        if (lent != null) {
            budget.release(lent.capacity());
        }
        expected = -1;
        // always, after the memory went back (so the overdraft never outlives it): a first fragment whose room was
        // refused left this connection among the holders without a frame in progress
        budget.notHolding(this);
    }

    /** A condemned connection takes no further fragment: it fails with the budget's reason. */
    private void failIfCondemned() throws LimitExceededException {
        String why = condemnedWhy;
        if (why != null) {
            throw new LimitExceededException(why);
        }
    }

    /** Why the transport's budget condemned this connection (it squats on reassembly memory), or null. */
    public String condemnation() {
        return condemnedWhy;
    }

    boolean condemned() {
        return condemnedWhy != null;
    }

    /** Called by the budget, under its lock: marks this connection condemned; returns what it holds. */
    long condemn(String why) {
        condemnedHeld = held;
        condemnedWhy = why;
        return condemnedHeld;
    }

    /** Called by the budget, under its lock, when this frame ends: lifts a condemnation; returns its overdraft. */
    long pardon() {
        long overdraft = condemnedHeld;
        condemnedHeld = 0;
        condemnedWhy = null;
        return overdraft;
    }

    /** Bytes of the unfinished frame put together so far (the next fragment's offset); -1 when none is. */
    public int received() {
        return expected < 0 ? -1 : frame.position();
    }

    public boolean inProgress() {
        return expected >= 0;
    }

    /** When the unfinished frame's first fragment came (System.nanoTime); meaningful while {@link #inProgress()}. */
    public long startedAt() {
        return startedAt;
    }

    /** Heap held right now, reserved from the budget (any thread). */
    public int heldBytes() {
        return held;
    }
}
