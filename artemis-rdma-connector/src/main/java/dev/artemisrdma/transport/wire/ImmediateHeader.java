package dev.artemisrdma.transport.wire;

import dev.artemisrdma.transport.fabric.FabricException;

/**
 * The header of a fragment that fills a whole receive slot, carried in the SEND's 32 bits of immediate data
 * (SEND_WITH_IMM) instead of in front of the payload. Only to a peer whose handshake says it reads them
 * ({@link Handshake#FEATURE_IMMEDIATE_FRAGMENTS}), and only for frames larger than a slot's room behind an in-band
 * {@link FrameHeader}: with the header in band a 64 KiB frame needs 64 KiB + 5 x 8 bytes, 17 packets at RoCE MTU
 * 4096 where one SEND of it needs 16, and on rxe (and any NIC whose cost is per packet) the stream loses that 17th.
 * With the header in the immediate every fragment is a whole slot of payload: 4 SENDs of 16 KiB, 16 packets.
 *
 * <pre>
 *  first fragment:         bit 31 = 1, bits 0..30 the whole frame's length
 *  continuation fragment:  bit 31 = 0, bit 30 LAST, bit 29 {@link FrameHeader#HINT_CREDIT_WANTED},
 *                          bit 28 = 0, bits 16..27 zero, bits 0..15 credits returned
 *  whole frame:            bit 31 = 0, bit 30 LAST = 1, bit 29 {@link FrameHeader#HINT_CREDIT_WANTED},
 *                          bit 28 WHOLE = 1, bits 16..27 zero, bits 0..15 credits returned
 * </pre>
 *
 * A continuation's offset is not sent: RC delivers a queue pair's SENDs in order, so it is what the receiver has put
 * together so far. A first fragment returns no credit and carries no hint (its 31 bits hold the length): the sender
 * gives it only when it holds a credit beyond the one it spends (the last credit goes only with a SEND that returns
 * credit, see {@code CreditWindow}), and what it owes rides on the next SEND. (So a frame of exactly one slot sent as a
 * single immediate first fragment never asks for a larger window; frames of two slots or more ask with their
 * continuations, and a whole frame asks itself.) Immediate data is never PACKED, CREDIT or CLOSE.
 *
 * <p>A whole frame (bit 28) is a frame of one SEND, its length the SEND's, that returns credit and carries the hint as
 * a continuation does: only to a peer that states {@link Handshake#FEATURE_IMMEDIATE_WHOLE}, for a frame whose in-band
 * header would cost a packet of its own (1 KiB at RoCE MTU 1024) or a SEND of its own (a frame of exactly one slot). The first-fragment form of such a frame returns no
 * credit, so a request/reply of them needed a credit frame every few messages (issue 24's MTU 1024 A/B: 53,333 credit
 * frames for 160,001 SENDs) and stalled on the window in between.
 */
public final class ImmediateHeader {

    private static final int FIRST_BIT = 1 << 31;
    private static final int LAST_BIT = 1 << 30;
    private static final int CREDIT_WANTED_BIT = 1 << 29;
    private static final int WHOLE_BIT = 1 << 28;
    private static final int RESERVED_BITS = 0x0FFF_0000;

    private ImmediateHeader() {
    }

    /** A first fragment's immediate data: the frame's length. */
    public static int first(int frameLength) {
        if (frameLength < 0) {
            throw new IllegalArgumentException("frame length " + frameLength);
        }
        return FIRST_BIT | frameLength;
    }

    /** A continuation fragment's immediate data. */
    public static int continuation(boolean last, int hints, int credits) {
        if (credits < 0 || credits > FrameHeader.MAX_CREDITS) {
            throw new IllegalArgumentException("credits " + credits);
        }
        return (last ? LAST_BIT : 0) | ((hints & FrameHeader.HINT_CREDIT_WANTED) != 0 ? CREDIT_WANTED_BIT : 0)
                | credits;
    }

    /** A whole frame's immediate data: the SEND is the frame; it returns credit like a continuation. */
    public static int whole(int hints, int credits) {
        return continuation(true, hints, credits) | WHOLE_BIT;
    }

    public static boolean isFirst(int immediate) {
        return (immediate & FIRST_BIT) != 0;
    }

    /** A first fragment's frame length (never negative: 31 bits). */
    public static int frameLength(int immediate) {
        return immediate & ~FIRST_BIT;
    }

    /** A whole frame of one SEND (the immediate data of a continuation with bit 28; see {@link #whole}). */
    public static boolean isWhole(int immediate) {
        return (immediate & (FIRST_BIT | WHOLE_BIT)) == WHOLE_BIT;
    }

    public static boolean isLast(int immediate) {
        return (immediate & LAST_BIT) != 0;
    }

    public static boolean creditWanted(int immediate) {
        return (immediate & CREDIT_WANTED_BIT) != 0;
    }

    public static int credits(int immediate) {
        return immediate & FrameHeader.MAX_CREDITS;
    }

    /**
     * Checks a continuation's (or a whole frame's) reserved bits: a peer that sets them speaks something else, and
     * guessing would misread its credits. A whole frame is also its last fragment: WHOLE without LAST is not ours.
     */
    public static void checkContinuation(int immediate) throws FabricException {
        if ((immediate & RESERVED_BITS) != 0) {
            throw new FabricException(String.format("protocol error: fragment immediate data 0x%08x sets reserved "
                    + "bits", immediate));
        }
        if ((immediate & (WHOLE_BIT | LAST_BIT)) == WHOLE_BIT) {
            throw new FabricException(String.format("protocol error: immediate data 0x%08x says a whole frame but "
                    + "not its last fragment", immediate));
        }
    }
}
