package dev.artemisrdma.transport.wire;

/**
 * The layout of a work request id, which is how a completion finds its way back without a lookup: the channel's
 * index in its completion loop in the high 32 bits, the receive bit, and the slot (send ring slot or receive slot)
 * below it. A shared receive pool's receives carry all ones as their index, which no channel has, and the pool slot;
 * their channel is found by the queue pair number the completion names instead.
 */
public final class WorkRequestIds {

    /** Set on receives, clear on sends. */
    public static final long RECV_BIT = 1L << 31;
    /** The index field of a shared pool's receive. */
    public static final int SHARED_POOL_INDEX = -1;
    /** The high bits of every shared pool receive's id. */
    public static final long SHARED_POOL_RECEIVE = (0xFFFFFFFFL << 32) | RECV_BIT;

    private WorkRequestIds() {
    }

    /** The base of a channel's send ids: its index; add the ring slot. */
    public static long sends(int channelIndex) {
        return (long) channelIndex << 32;
    }

    /** The base of a channel's receive ids: its index and the receive bit; add the receive slot. */
    public static long receives(int channelIndex) {
        return ((long) channelIndex << 32) | RECV_BIT;
    }

    public static int channelIndex(long wrId) {
        return (int) (wrId >>> 32);
    }

    public static int slot(long wrId) {
        return (int) (wrId & 0x7FFFFFFFL);
    }

    public static boolean isReceive(long wrId) {
        return (wrId & RECV_BIT) != 0;
    }
}
