package dev.artemisrdma.transport.wire;

import java.nio.ByteBuffer;
import java.util.function.Consumer;

import dev.artemisrdma.transport.fabric.FabricException;

/**
 * The payload of a {@link FrameHeader#PACKED} SEND: several whole frames, each a 4-byte big-endian length followed
 * by its bytes, back to back; the outer header's length field says how many there are.
 *
 * <p>Why: on RDMA the cost of a small message is the SEND, not its bytes (a work request, a packet, a receive
 * completion, a reposted receive and one credit each). Frames that queued behind a credit wait or a full send
 * ring are therefore copied into one slot-sized registered buffer and leave as one SEND on one credit. The copy
 * gives up zero-copy for those small frames only: copying a few hundred bytes costs tens of nanoseconds, a SEND
 * costs microseconds on rxe (and a scatter-gather entry per frame would cost an lkey lookup each and cap a SEND
 * at max_send_sge frames). A lone frame, and any frame above {@link #MAX_PACKED_FRAME}, still goes zero-copy
 * from the buffer it was encoded in, and nothing ever waits for company: packing only takes what already queued.
 *
 * <p>Everything here is bounded by the SEND itself: a receiver validates every inner length against the bytes
 * that really arrived before delivering any frame, so lying lengths are a protocol error, never a read past the
 * slot.
 */
public final class PackedFrames {

    /** The length in front of each packed frame. */
    static final int ENTRY_HEADER = 4;
    /** Larger frames are never packed: their copy would start to cost what a SEND does, and few fit in a slot. */
    public static final int MAX_PACKED_FRAME = 4 << 10;

    private PackedFrames() {
    }

    /** Bytes a frame of {@code frameLength} takes in a packed payload. */
    public static int entryLength(int frameLength) {
        return ENTRY_HEADER + frameLength;
    }

    /** Copies bytes [0, frameLength) of {@code frame} into {@code dst} at {@code at}, with its length; returns the next offset. */
    public static int put(ByteBuffer dst, int at, ByteBuffer frame, int frameLength) {
        dst.putInt(at, frameLength);
        dst.put(at + ENTRY_HEADER, frame, 0, frameLength);
        return at + ENTRY_HEADER + frameLength;
    }

    /**
     * Checks that bytes [from, to) of {@code b} hold exactly {@code count} frames of at most {@code maxFrame} bytes.
     *
     * @throws FabricException a protocol error naming the first lie
     */
    public static void validate(ByteBuffer b, int from, int to, int count, int maxFrame) throws FabricException {
        if (count < 1) {
            throw new FabricException("protocol error: packed SEND says it holds " + count + " frames");
        }
        b.limit(to).position(from);
        int at = from;
        for (int i = 0; i < count; i++) {
            int left = to - at;
            if (left < ENTRY_HEADER) {
                throw new FabricException("protocol error: packed SEND says " + count + " frames, its " + (to - from)
                        + " bytes end inside the header of frame " + i);
            }
            int length = b.getInt(at);
            if (length < 0 || length > left - ENTRY_HEADER || length > maxFrame) {
                throw new FabricException("protocol error: packed frame " + i + " of " + count + " says " + length
                        + " bytes, " + (left - ENTRY_HEADER) + " are left in the SEND (maximum frame " + maxFrame
                        + ")");
            }
            at += ENTRY_HEADER + length;
        }
        if (at != to) {
            throw new FabricException("protocol error: packed SEND of " + count + " frames has " + (to - at)
                    + " bytes after its last frame");
        }
    }

    /**
     * Hands each frame of bytes [from, to), a payload {@link #validate}d before, to {@code sink}, in order, as {@code b} itself with
     * position and limit around the frame (set afresh for each, whatever the sink did to them).
     */
    public static void forEach(ByteBuffer b, int from, int to, int count, Consumer<ByteBuffer> sink) {
        int at = from;
        for (int i = 0; i < count; i++) {
            b.limit(to); // absolute reads are bounded by the limit, which the last frame's delivery narrowed
            int start = at + ENTRY_HEADER;
            int end = start + b.getInt(at);
            b.position(start).limit(end);
            sink.accept(b);
            at = end;
        }
    }
}
