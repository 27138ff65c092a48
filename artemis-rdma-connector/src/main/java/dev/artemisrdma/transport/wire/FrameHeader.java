package dev.artemisrdma.transport.wire;

import java.nio.ByteBuffer;

/**
 * The 8-byte header in front of every SEND: written into the send buffer's headroom when the SEND starts at the
 * buffer's first byte (one scatter-gather entry for header and payload), else into the send ring's header slot (an
 * entry of its own); payloads are never copied to make room for it. Big-endian:
 *
 * <pre>
 *  0  1  flags: FIRST, LAST (fragment position), CREDIT (no payload: a credit return), CLOSE (orderly goodbye),
 *           PACKED (the payload is several whole frames, see {@link PackedFrames}); with CREDIT only:
 *           RECALL (give back the credits you hold beyond the count at offset 4, if nothing waits to be sent),
 *           RELEASE (the count at offset 4 of the receiver's credits are given back unspent)
 *  1  1  hints: bit 0 {@link #HINT_CREDIT_WANTED} (frames wait behind this one for credit: grant more if you can);
 *           only to a peer whose handshake grows credits; older receivers never read this byte
 *  2  2  credits returned to the receiver of this SEND (unsigned)
 *  4  4  FIRST fragment: the whole frame's length; later fragments: this fragment's offset in the frame;
 *           PACKED: how many frames the payload holds; RECALL: the credits the sender may keep; RELEASE: the credits
 *           given back
 * </pre>
 *
 * A frame of one fragment carries FIRST|LAST. The payload length is the SEND's length minus the header. PACKED
 * stands alone (no other flag) and only goes to a peer whose handshake said it reads it
 * ({@link Handshake#FEATURE_PACKED}).
 */
public final class FrameHeader {

    public static final int LENGTH = 8;
    public static final int FIRST = 0x01;
    public static final int LAST = 0x02;
    public static final int CREDIT = 0x04;
    public static final int CLOSE = 0x08;
    public static final int PACKED = 0x10;
    /**
     * A credit frame from a receiver that grants from a shared pool: the pool needs its receives back. Only to a peer
     * that states {@link Handshake#FEATURE_CREDIT_RECALL}.
     */
    public static final int RECALL = 0x20;
    /** A credit frame that gives credits back unspent, in answer to {@link #RECALL}. */
    public static final int RELEASE = 0x40;
    public static final int MAX_CREDITS = 0xFFFF;
    /** Hint: the sender has frames queued behind this SEND; a receiver with a shared pool may grant it more. */
    public static final int HINT_CREDIT_WANTED = 0x01;

    private FrameHeader() {
    }

    public static void write(ByteBuffer b, int offset, int flags, int credits, int lengthOrOffset) {
        write(b, offset, flags, 0, credits, lengthOrOffset);
    }

    public static void write(ByteBuffer b, int offset, int flags, int hints, int credits, int lengthOrOffset) {
        if (credits < 0 || credits > MAX_CREDITS) {
            throw new IllegalArgumentException("credits " + credits);
        }
        b.put(offset, (byte) flags);
        b.put(offset + 1, (byte) hints);
        b.putShort(offset + 2, (short) credits);
        b.putInt(offset + 4, lengthOrOffset);
    }

    public static int flags(ByteBuffer b, int offset) {
        return b.get(offset) & 0xFF;
    }

    public static int hints(ByteBuffer b, int offset) {
        return b.get(offset + 1) & 0xFF;
    }

    public static int credits(ByteBuffer b, int offset) {
        return b.getShort(offset + 2) & 0xFFFF;
    }

    public static int lengthOrOffset(ByteBuffer b, int offset) {
        return b.getInt(offset + 4);
    }
}
