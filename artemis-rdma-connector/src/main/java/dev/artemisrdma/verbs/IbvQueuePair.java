package dev.artemisrdma.verbs;

/**
 * A reliable-connected queue pair created through rdma_cm. Posting re-implements the static inline
 * rdma_post_sendv / rdma_post_recvv over the provider's function table (via the native shim), for whole lists of
 * work requests at a time. Every argument is validated in Java first, so a bad request fails with a message
 * instead of reaching the provider; sends are refused until the connection is established.
 *
 * <p>Threads: its {@link RdmaCmId} creates and destroys it (under the id's lock); the transport's queue pair owns it
 * and runs every post, and the destroy, inside one lock (its {@code PostGate}), so posts never run at once (which is
 * what lets them share the one {@code bad_wr} slot) and a destroy waits for a post under way. {@code established}
 * and {@code destroyed} are volatile: the rdma_cm event thread or the connecting thread (or the completion loop, on
 * an early first SEND) marks it established, the destroy marks it destroyed.
 */
public final class IbvQueuePair {

    private static final int IBV_QP_AV = 1 << 7;
    private static final int IBV_QP_TIMEOUT = 1 << 9;
    private static final int IBV_QP_RETRY_CNT = 1 << 10;
    private static final int IBV_QP_STATE = 1;
    private static final int IBV_QPS_ERR = Abi.QPS_ERR;

    private final RdmaCmId id;
    private final long qp;
    private final int qpNumber;
    private final QueuePairCapabilities caps;
    private final NativeStruct badWr = new NativeStruct(8);
    private volatile boolean established;
    private volatile boolean destroyed;

    IbvQueuePair(RdmaCmId id, long qp, QueuePairCapabilities caps) {
        this.id = id;
        this.qp = qp;
        this.caps = caps;
        this.qpNumber = NativeStruct.readInt(qp, Abi.QP_QP_NUM);
    }

    public QueuePairCapabilities capabilities() {
        return caps;
    }

    public int qpNumber() {
        return qpNumber;
    }

    /**
     * The traffic class of the queue pair's address vector (ibv_query_qp, IBV_QP_AV): on RoCE the IP type of service
     * its packets carry, which rdma_cm takes from RDMA_OPTION_ID_TOS. Valid once the queue pair is connected.
     */
    public int trafficClass() throws VerbsException {
        return queryBytes(IBV_QP_AV, "IBV_QP_AV", Abi.QP_ATTR_AH_ATTR + Abi.AH_ATTR_TRAFFIC_CLASS)[0];
    }

    /**
     * The local ACK timeout exponent (4.096 us x 2^timeout) and the retry count the queue pair runs with (ibv_query_qp,
     * IBV_QP_TIMEOUT and IBV_QP_RETRY_CNT): what rdma_cm set from RDMA_OPTION_ID_ACK_TIMEOUT and the connect request.
     * Valid once the queue pair is connected. Returns {timeout, retryCount}.
     */
    public int[] retryParameters() throws VerbsException {
        return queryBytes(IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT, "IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT", Abi.QP_ATTR_TIMEOUT,
                Abi.QP_ATTR_RETRY_CNT);
    }

    /** ibv_query_qp for {@code mask} (named {@code maskName} in errors): ibv_qp_attr's unsigned bytes at offsets. */
    private int[] queryBytes(int mask, String maskName, int... offsets) throws VerbsException {
        if (destroyed) {
            throw new VerbsException("ibv_query_qp: queue pair " + qpNumber + " is destroyed");
        }
        try (NativeStruct attr = new NativeStruct(Abi.QP_ATTR_SIZE);
             NativeStruct init = new NativeStruct(Abi.QP_INIT_ATTR_SIZE)) {
            int rc = IbVerbs.ibv_query_qp(qp, attr.address(), mask, init.address());
            if (rc != 0) {
                throw new VerbsException("ibv_query_qp", rc, "(" + maskName + ") for queue pair " + qpNumber);
            }
            int[] values = new int[offsets.length];
            for (int i = 0; i < offsets.length; i++) {
                values[i] = attr.view().get(offsets[i]) & 0xff;
            }
            return values;
        }
    }

    public boolean isEstablished() {
        return established;
    }

    /**
     * Moves the queue pair to the error state locally (ibv_modify_qp), so outstanding work requests flush, without
     * a word to the peer: rdma_disconnect would also send a DREQ, which must not happen while the port is down.
     */
    public void moveToError() throws VerbsException {
        if (destroyed) {
            throw new VerbsException("ibv_modify_qp: queue pair " + qpNumber + " is destroyed");
        }
        try (NativeStruct attr = new NativeStruct(Abi.QP_ATTR_SIZE)) {
            attr.putInt(Abi.QP_ATTR_QP_STATE, IBV_QPS_ERR);
            int rc = IbVerbs.ibv_modify_qp(qp, attr.address(), IBV_QP_STATE);
            if (rc != 0) {
                throw new VerbsException("ibv_modify_qp", rc, "(IBV_QPS_ERR) for queue pair " + qpNumber);
            }
        }
        established = false;
    }

    /**
     * Called by the connection owner on RDMA_CM_EVENT_ESTABLISHED (or when rdma_connect completed), or on the passive
     * side when the peer's first SEND arrived before that event: the peer could only send once it had our reply, and
     * rdma_accept has already moved our queue pair to RTS.
     */
    public void markEstablished() {
        established = true;
    }

    /** Posts every request of {@code list} with one ibv_post_send call. */
    public void postSend(SendRequests list) throws VerbsException {
        if (destroyed) {
            throw new VerbsException("rdma_post_sendv: queue pair " + qpNumber + " is destroyed");
        }
        if (!established) {
            throw new VerbsException("rdma_post_sendv: the connection to " + id.describePeer()
                    + " is not established yet; sends may only be posted after RDMA_CM_EVENT_ESTABLISHED");
        }
        int n = list.size();
        if (n == 0) {
            return;
        }
        if (n > caps.maxSendWr()) {
            throw new VerbsException("rdma_post_sendv: " + n + " work requests exceed the send queue depth "
                    + caps.maxSendWr());
        }
        for (int i = 0; i < n; i++) {
            if (list.sgeCount(i) > caps.maxSendSge()) {
                throw new VerbsException("rdma_post_sendv: " + list.sgeCount(i) + " scatter-gather entries exceed "
                        + "max_send_sge " + caps.maxSendSge());
            }
            if ((list.flags(i) & SendRequests.IBV_SEND_INLINE) != 0 && list.byteLength(i) > caps.maxInlineData()) {
                throw new VerbsException("rdma_post_sendv: inline send of " + list.byteLength(i)
                        + " bytes exceeds max_inline_data " + caps.maxInlineData());
            }
        }
        badWr.putLong(0, 0);
        int rc = DataPath.postSend(qp, list.link(), badWr.address());
        if (rc != 0) {
            int failedAt = list.indexOf(badWr.getLong(0));
            int posted = failedAt < 0 ? 0 : failedAt;
            throw new PostFailedException("rdma_post_sendv", rc, "on queue pair " + qpNumber + " to "
                    + id.describePeer() + " (" + posted + " of " + n + " posted)", posted);
        }
    }

    /** Posts every receive of {@code list} with one ibv_post_recv call; allowed before the connection is up. */
    public void postRecv(RecvRequests list) throws VerbsException {
        if (destroyed) {
            throw new VerbsException("rdma_post_recvv: queue pair " + qpNumber + " is destroyed");
        }
        int n = list.size();
        if (n == 0) {
            return;
        }
        if (n > caps.maxRecvWr()) {
            throw new VerbsException("rdma_post_recvv: " + n + " receives exceed the receive queue depth "
                    + caps.maxRecvWr());
        }
        badWr.putLong(0, 0);
        int rc = DataPath.postRecv(qp, list.link(), badWr.address());
        if (rc != 0) {
            int failedAt = list.indexOf(badWr.getLong(0));
            int posted = failedAt < 0 ? 0 : failedAt;
            throw new PostFailedException("rdma_post_recvv", rc, "on queue pair " + qpNumber + " to "
                    + id.describePeer() + " (" + posted + " of " + n + " posted)", posted);
        }
    }

    void markDestroyed() {
        destroyed = true;
        established = false;
        // badWr is left to the garbage collector: a racing post on another thread may still be writing it.
    }

    public boolean isDestroyed() {
        return destroyed;
    }
}
