package dev.artemisrdma.transport.flow;

import java.nio.ByteBuffer;

import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.wire.FrameHeader;

/**
 * Puts fragmented frames back together. A frame of one fragment is handed on as the receive slot itself (no
 * copy); a fragmented one is copied, fragment by fragment, into a heap buffer that is kept for the next frame
 * unless it grew beyond {@code retainBytes}. Checks that fragments arrive as the protocol says they must (RC
 * delivers in order, so anything else is a peer bug). Used by the completion loop thread only.
 *
 * <p>Nothing a peer claims costs memory before it arrives: a first fragment's frame length is only checked against
 * the bounds, and the buffer grows (doubling, never beyond the frame) as fragments really come. What it holds counts
 * against {@code maxReassemblyBytes} for the connection and the transport's {@link ReassemblyBudget}; an unfinished
 * frame is timed from its first fragment ({@link #startedAt()}), so the completion loop can enforce a deadline.
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
    private long startedAt;

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
            ensureRoom(Math.min(lengthOrOffset, Math.max(n, MIN_ALLOCATION)), lengthOrOffset);
            frame.clear();
            expected = lengthOrOffset;
            startedAt = System.nanoTime(); // the clock is read for fragmented frames only
            frame.put(payload);
            return null;
        }
        if (expected < 0) {
            throw new FabricException("protocol error: continuation fragment without a first one");
        }
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
        return frame;
    }

    /**
     * Makes the buffer hold at least {@code needed} bytes: doubles it (capped at the frame's length), keeps what it
     * holds, and charges the growth to the budget first.
     */
    private void ensureRoom(int needed, int frameLength) throws FabricException {
        int have = frame == null ? 0 : frame.capacity();
        if (have >= needed) {
            return;
        }
        int grown = (int) Math.min(frameLength, Math.max(needed, 2L * have));
        if (!budget.tryReserve(grown - have)) {
            throw new LimitExceededException("reassembly would need " + (grown - have) + " more bytes of heap, but the "
                    + "transport's connections already hold " + budget.used() + " of reassemblyMemory ("
                    + budget.limit() + "); raise reassemblyMemory");
        }
        ByteBuffer bigger = ByteBuffer.allocate(grown);
        if (frame != null) {
            frame.flip();
            bigger.put(frame);
        }
        frame = bigger;
    }

    /**
     * The handler is done with the last frame returned; drops an outsized buffer, and any buffer while the
     * transport's connections hold more than half the budget (kept buffers must not starve frames in progress).
     */
    public void delivered() {
        if (frame != null && expected < 0
                && (frame.capacity() > retainBytes || budget.used() > budget.limit() / 2)) {
            budget.release(frame.capacity());
            frame = null;
        }
    }

    /** The connection is gone: whatever is held goes back to the budget. */
    public void release() {
        if (frame != null) {
            budget.release(frame.capacity());
            frame = null;
        }
        expected = -1;
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

    /** Heap held right now, reserved from the budget. */
    public int heldBytes() {
        return frame == null ? 0 : frame.capacity();
    }
}
