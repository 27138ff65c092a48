package dev.artemisrdma.transport;

import java.nio.ByteBuffer;

/**
 * Puts fragmented frames back together. A frame of one fragment is handed on as the receive slot itself (no
 * copy); a fragmented one is copied, fragment by fragment, into a heap buffer that is kept for the next frame
 * unless it grew beyond {@code retainBytes}. Checks that fragments arrive as the protocol says they must (RC
 * delivers in order, so anything else is a peer bug). Used by the completion loop thread only.
 */
final class Reassembler {

    private final int maxFrameSize;
    private final int retainBytes;
    private ByteBuffer frame;
    private int expected = -1;

    Reassembler(int maxFrameSize, int retainBytes) {
        this.maxFrameSize = maxFrameSize;
        this.retainBytes = retainBytes;
    }

    /**
     * Takes one fragment ({@code payload} from position to limit) and returns the whole frame when this was its
     * last fragment, else null. The returned buffer is valid until the next call or {@link #delivered()}.
     */
    ByteBuffer accept(ByteBuffer payload, int flags, int lengthOrOffset) throws FabricException {
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
            if (frame == null || frame.capacity() < lengthOrOffset) {
                frame = ByteBuffer.allocate(lengthOrOffset);
            }
            frame.clear().limit(lengthOrOffset);
            expected = lengthOrOffset;
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
        if (n > frame.remaining() || (last && n != frame.remaining()) || (!last && n == frame.remaining())) {
            throw new FabricException("protocol error: fragments do not add up to the frame length " + expected);
        }
        frame.put(payload);
        if (!last) {
            return null;
        }
        frame.flip();
        expected = -1;
        return frame;
    }

    /** The handler is done with the last frame returned; drops an outsized buffer. */
    void delivered() {
        if (frame != null && frame.capacity() > retainBytes && expected < 0) {
            frame = null;
        }
    }

    boolean inProgress() {
        return expected >= 0;
    }
}
