package dev.artemisrdma.verbs;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;

/**
 * The data-path verbs through the native shim (libartemisrdma.so, compiled against the rdma-core headers):
 * ibv_post_send, ibv_post_recv, ibv_poll_cq and ibv_req_notify_cq are static inline in C and reachable only
 * through a symbol of our own. Direct mapping makes each call cost about as much as a JNI call; JNA's
 * reflective Function.invoke would cost ten times more (jna-on-rxe.md).
 */
final class DataPath {

    static final NativeLibrary LIBRARY = NativeLibraries.shim();

    static {
        Native.register(DataPath.class, LIBRARY);
    }

    private DataPath() {
    }

    /** Returns 0 or a positive errno; {@code badWr} receives the first work request not posted. */
    static native int ardma_post_send(long qp, long wr, long badWr);

    static native int ardma_post_recv(long qp, long wr, long badWr);

    /** Returns the number of completions written to {@code wc}, or a negative value on error. */
    static native int ardma_poll_cq(long cq, int numEntries, long wc);

    /** Like ardma_poll_cq, but retries in native code up to {@code spins} times while the queue is empty. */
    static native int ardma_poll_cq_spin(long cq, int numEntries, long wc, int spins);

    static native int ardma_req_notify_cq(long cq, int solicitedOnly);

    static native int ardma_abi_count();

    static native String ardma_abi_name(int index);

    static native long ardma_abi_value(int index);
}
