package dev.artemisrdma.verbs;

/**
 * The data-path verbs through the native shim, as plain JNI methods: ibv_post_send, ibv_post_recv, ibv_poll_cq and
 * ibv_req_notify_cq are static inline in C and reachable only through code of our own. A JNI call costs one
 * transition (about 60 ns in the lab guest, 5 ns on a host); a JNA direct-mapped call, which converts each argument
 * through generic dispatch, costs twenty times more, as much as a small message's trip across the fabric.
 *
 * <p>Every argument is a raw address the caller has validated: these methods check nothing.
 */
final class DataPath {

    static {
        ShimLibrary.registerDataPath();
    }

    private DataPath() {
    }

    /** ibv_post_send: returns 0 or a positive errno; {@code badWr} receives the first work request not posted. */
    static native int postSend(long qp, long wr, long badWr);

    /** ibv_post_recv: as {@link #postSend}. */
    static native int postRecv(long qp, long wr, long badWr);

    /** ibv_poll_cq: the number of completions written to {@code wc}, or a negative value on error. */
    static native int pollCq(long cq, int numEntries, long wc);

    /** Like {@link #pollCq}, but retries in native code up to {@code spins} times while the queue is empty. */
    static native int pollCqSpin(long cq, int numEntries, long wc, int spins);

    /** ibv_req_notify_cq: 0 or a positive errno. */
    static native int reqNotifyCq(long cq, int solicitedOnly);

    /** The shim's layout-table size through JNI, to prove the binding at start-up. */
    static native int abiCount();

    /** ibv_post_srq_recv: as {@link #postRecv}, on a shared receive queue. */
    static native int postSrqRecv(long srq, long wr, long badWr);
}
