package dev.artemisrdma.verbs;

import java.net.InetSocketAddress;

/**
 * An rdma_cm_id and the queue pair created on it. Each step of a connection's life is one method; the events
 * that answer the asynchronous steps (resolve, connect, accept) arrive on the {@link RdmaEventChannel} and are
 * routed by the owner. Destruction follows rdma_cm's order: queue pair first ({@link #destroyQueuePair}), then the
 * id ({@link #close}), whose events must all have been acknowledged (the event channel does that at once).
 */
public final class RdmaCmId implements AutoCloseable {

    private static final int RDMA_PS_TCP = 0x106;
    private static final int IBV_QPT_RC = 2;
    private static final int RDMA_OPTION_ID = 0;
    private static final int RDMA_OPTION_ID_TOS = 0;
    /** librdmacm's rdma_cma.h (kernel uapi rdma_user_cm.h): the queue pair's local ACK timeout, a u8. */
    private static final int RDMA_OPTION_ID_ACK_TIMEOUT = 3;

    private final long id;
    private IbvQueuePair queuePair;
    /**
     * Set once by {@link #close}. Every method that passes {@link #id} to librdmacm, or reads the struct behind it,
     * holds this object's monitor and checks it: the connection-manager thread, a closing transport and a timer
     * may all reach one id, and a call on a destroyed id reads freed memory.
     */
    private boolean closed;

    private RdmaCmId(long id) {
        this.id = id;
    }

    /** A new id on {@code channel} (RDMA_PS_TCP: reliable connected). */
    public static RdmaCmId create(RdmaEventChannel channel) throws VerbsException {
        try (NativeStruct out = new NativeStruct(8)) {
            if (RdmaCm.rdma_create_id(channel.address(), out.address(), 0, RDMA_PS_TCP) != 0) {
                throw VerbsException.fromErrno("rdma_create_id", "");
            }
            return new RdmaCmId(out.getLong(0));
        }
    }

    /** Takes ownership of the new id a CONNECT_REQUEST event carries. */
    public static RdmaCmId adopt(long idAddress) {
        NativeStruct.requireNonNull(idAddress, "rdma_cm_id");
        return new RdmaCmId(idAddress);
    }

    /**
     * The peer address of the new id a CONNECT_REQUEST event carries, read before anyone adopts it (the id lives until
     * it is destroyed); null when it has none.
     */
    public static InetSocketAddress peerAddressOf(long idAddress) {
        NativeStruct.requireNonNull(idAddress, "rdma_cm_id");
        return SocketAddresses.decode(idAddress + Abi.CM_ID_DST_ADDR);
    }

    /** The native address, which events name in {@link CmEvent#id()}. */
    public long address() {
        return id;
    }

    public synchronized void bind(String host, int port) throws VerbsException {
        checkOpen();
        try (SocketAddresses.AddrInfo info = SocketAddresses.resolve(host, port, true)) {
            if (RdmaCm.rdma_bind_addr(id, info.sourceAddress()) != 0) {
                throw VerbsException.fromErrno("rdma_bind_addr", "to " + host + ":" + port);
            }
        }
    }

    /**
     * The RoCE type of service (IP TOS) of this id's connections: rdma_set_option(RDMA_OPTION_ID,
     * RDMA_OPTION_ID_TOS). Set before rdma_resolve_route (active side) or rdma_listen; rdma_cm puts it into the
     * route's traffic class and so into the queue pair's address vector.
     */
    public synchronized void setTypeOfService(int tos) throws VerbsException {
        checkOpen();
        if (tos < 0 || tos > 255) {
            throw new IllegalArgumentException("type of service must be 0..255, got " + tos);
        }
        setByteOption(RDMA_OPTION_ID_TOS, tos, "RDMA_OPTION_ID_TOS");
    }

    /**
     * The local ACK timeout of this id's queue pair, 4.096 us x 2^{@code exponent}: rdma_set_option(RDMA_OPTION_ID,
     * RDMA_OPTION_ID_ACK_TIMEOUT). The kernel applies it when it moves the queue pair to RTS, so it must be set
     * before rdma_connect (active side; before rdma_resolve_route it also sets RoCE's packet lifetime) or before
     * rdma_accept on the id of the request (passive side: it is not inherited from the listening id). 0 would turn
     * the timer off.
     */
    public synchronized void setAckTimeout(int exponent) throws VerbsException {
        checkOpen();
        if (exponent < 0 || exponent > 31) {
            throw new IllegalArgumentException("ACK timeout exponent must be 0..31, got " + exponent);
        }
        setByteOption(RDMA_OPTION_ID_ACK_TIMEOUT, exponent, "RDMA_OPTION_ID_ACK_TIMEOUT");
    }

    /** rdma_set_option(RDMA_OPTION_ID, option) with a one-byte value (already checked by the caller); holds this. */
    private void setByteOption(int option, int value, String name) throws VerbsException {
        try (NativeStruct byteValue = new NativeStruct(1)) {
            byteValue.putByte(0, value);
            if (RdmaCm.rdma_set_option(id, RDMA_OPTION_ID, option, byteValue.address(), 1) != 0) {
                throw VerbsException.fromErrno("rdma_set_option", "(" + name + " " + value + ")");
            }
        }
    }

    public synchronized void listen(int backlog) throws VerbsException {
        checkOpen();
        if (RdmaCm.rdma_listen(id, backlog) != 0) {
            throw VerbsException.fromErrno("rdma_listen", "on " + localAddress());
        }
    }

    /** Starts address resolution; RDMA_CM_EVENT_ADDR_RESOLVED or ADDR_ERROR follows. */
    public synchronized void resolveAddress(String host, int port, int timeoutMillis) throws VerbsException {
        checkOpen();
        try (SocketAddresses.AddrInfo info = SocketAddresses.resolve(host, port, false)) {
            if (RdmaCm.rdma_resolve_addr(id, 0, info.destinationAddress(), timeoutMillis) != 0) {
                throw VerbsException.fromErrno("rdma_resolve_addr", "for " + host + ":" + port);
            }
        }
    }

    /** Starts route resolution; RDMA_CM_EVENT_ROUTE_RESOLVED or ROUTE_ERROR follows. */
    public synchronized void resolveRoute(int timeoutMillis) throws VerbsException {
        checkOpen();
        if (RdmaCm.rdma_resolve_route(id, timeoutMillis) != 0) {
            throw VerbsException.fromErrno("rdma_resolve_route", "for " + describePeer());
        }
    }

    /** The verbs context (device) the id is bound to, 0 before address resolution. */
    public synchronized long verbsContext() {
        return closed ? 0 : NativeStruct.readPointer(id, Abi.CM_ID_VERBS);
    }

    /** The port of its device the id is bound to (rdma_cm_id.port_num), 0 before address resolution. */
    public synchronized int portNumber() {
        return closed ? 0 : new com.sun.jna.Pointer(id).getByte(Abi.CM_ID_PORT_NUM) & 0xff;
    }

    /** The device among {@code devices} this id resolved to. */
    public RdmaDevice device(RdmaDevices devices) throws VerbsException {
        RdmaDevice device = devices.byContext(verbsContext());
        if (device == null) {
            throw new VerbsException("rdma_cm id for " + describePeer() + " is on a device that was not open "
                    + "when the fabric last looked (hot-plugged?)");
        }
        return device;
    }

    /**
     * Creates the RC queue pair on {@code device}'s protection domain with the given completion queues; the
     * capabilities actually granted are read back with ibv_query_qp (devices round up).
     */
    public IbvQueuePair createQueuePair(RdmaDevice device, IbvCompletionQueue sendCq, IbvCompletionQueue recvCq,
                                        QueuePairCapabilities wanted) throws VerbsException {
        return createQueuePair(device, sendCq, recvCq, wanted, null);
    }

    /**
     * As {@link #createQueuePair(RdmaDevice, IbvCompletionQueue, IbvCompletionQueue, QueuePairCapabilities)}; with
     * {@code srq} the queue pair takes its receives from that shared receive queue (its own receive depth is 0).
     */
    public synchronized IbvQueuePair createQueuePair(RdmaDevice device, IbvCompletionQueue sendCq, IbvCompletionQueue recvCq,
                                        QueuePairCapabilities wanted, IbvSharedReceiveQueue srq)
            throws VerbsException {
        checkOpen();
        if (srq != null && srq.device() != device) {
            throw new VerbsException("rdma_create_qp: the shared receive queue must be on " + device.name());
        }
        if (queuePair != null) {
            throw new VerbsException("rdma_create_qp: id already has a queue pair");
        }
        if (device.context() != verbsContext()) {
            throw new VerbsException("rdma_create_qp: device " + device.name() + " is not the device the id "
                    + "resolved to");
        }
        if (sendCq.device() != device || recvCq.device() != device) {
            throw new VerbsException("rdma_create_qp: completion queues must be on " + device.name());
        }
        if (wanted.maxSendWr() > device.maxQpWr() || wanted.maxRecvWr() > device.maxQpWr()) {
            throw new VerbsException("rdma_create_qp: queue depth " + Math.max(wanted.maxSendWr(),
                    wanted.maxRecvWr()) + " exceeds max_qp_wr " + device.maxQpWr() + " of " + device.name());
        }
        if (wanted.maxSendSge() > device.maxSge() || wanted.maxRecvSge() > device.maxSge()) {
            throw new VerbsException("rdma_create_qp: " + Math.max(wanted.maxSendSge(), wanted.maxRecvSge())
                    + " scatter-gather entries exceed max_sge " + device.maxSge() + " of " + device.name());
        }
        int inlineAllowed = device.maxInlineData();
        if (inlineAllowed >= 0 && wanted.maxInlineData() > inlineAllowed) {
            // what the provider would answer, without asking it: EINVAL, so the transport fits a smaller ask
            throw new VerbsException("rdma_create_qp", Errno.EINVAL, "for " + describePeer() + " on "
                    + device.name() + ": " + wanted.maxInlineData() + " inline bytes asked, the device allows "
                    + inlineAllowed);
        }
        try (NativeStruct attr = new NativeStruct(Abi.QP_INIT_ATTR_SIZE)) {
            attr.putLong(Abi.QP_INIT_ATTR_SEND_CQ, sendCq.address());
            attr.putLong(Abi.QP_INIT_ATTR_RECV_CQ, recvCq.address());
            attr.putInt(Abi.QP_INIT_ATTR_CAP + Abi.QP_CAP_MAX_SEND_WR, wanted.maxSendWr());
            attr.putInt(Abi.QP_INIT_ATTR_CAP + Abi.QP_CAP_MAX_SEND_SGE, wanted.maxSendSge());
            if (srq != null) {
                attr.putLong(Abi.QP_INIT_ATTR_SRQ, srq.address()); // receive depth and SGEs stay 0: ignored
            } else {
                attr.putInt(Abi.QP_INIT_ATTR_CAP + Abi.QP_CAP_MAX_RECV_WR, wanted.maxRecvWr());
                attr.putInt(Abi.QP_INIT_ATTR_CAP + Abi.QP_CAP_MAX_RECV_SGE, wanted.maxRecvSge());
            }
            attr.putInt(Abi.QP_INIT_ATTR_CAP + Abi.QP_CAP_MAX_INLINE_DATA, wanted.maxInlineData());
            attr.putInt(Abi.QP_INIT_ATTR_QP_TYPE, IBV_QPT_RC);
            attr.putInt(Abi.QP_INIT_ATTR_SQ_SIG_ALL, 0);
            if (RdmaCm.rdma_create_qp(id, device.pd(), attr.address()) != 0) {
                throw VerbsException.fromErrno("rdma_create_qp", "for " + describePeer() + " on " + device.name()
                        + " asking " + wanted);
            }
        }
        long qp = NativeStruct.readPointer(id, Abi.CM_ID_QP);
        // ABI self-check at run time: the queue pair must belong to the id's verbs context.
        if (qp == 0 || NativeStruct.readPointer(qp, Abi.QP_CONTEXT) != verbsContext()) {
            RdmaCm.rdma_destroy_qp(id);
            throw new RdmaSetupException("rdma_create_qp returned a queue pair whose layout does not match the "
                    + "binding (rdma_cm_id.qp->context != rdma_cm_id.verbs): unsupported rdma-core ABI");
        }
        queuePair = new IbvQueuePair(this, qp, queryCapabilities(qp));
        return queuePair;
    }

    private QueuePairCapabilities queryCapabilities(long qp) throws VerbsException {
        try (NativeStruct attr = new NativeStruct(Abi.QP_ATTR_SIZE);
             NativeStruct init = new NativeStruct(Abi.QP_INIT_ATTR_SIZE)) {
            int rc = IbVerbs.ibv_query_qp(qp, attr.address(), 0, init.address());
            if (rc != 0) {
                throw new VerbsException("ibv_query_qp", rc, "for " + describePeer());
            }
            int cap = Abi.QP_INIT_ATTR_CAP;
            return new QueuePairCapabilities(init.getInt(cap + Abi.QP_CAP_MAX_SEND_WR),
                    init.getInt(cap + Abi.QP_CAP_MAX_RECV_WR), init.getInt(cap + Abi.QP_CAP_MAX_SEND_SGE),
                    init.getInt(cap + Abi.QP_CAP_MAX_RECV_SGE), init.getInt(cap + Abi.QP_CAP_MAX_INLINE_DATA));
        }
    }

    public synchronized IbvQueuePair queuePair() {
        return queuePair;
    }

    /** rdma_connect; ESTABLISHED (with the peer's reply data), REJECTED, UNREACHABLE or CONNECT_ERROR follows. */
    public synchronized void connect(byte[] privateData, int retryCount, int rnrRetryCount) throws VerbsException {
        checkOpen();
        checkPrivateData(privateData, 56, "rdma_connect");
        try (ConnParam param = new ConnParam(privateData, retryCount, rnrRetryCount)) {
            if (RdmaCm.rdma_connect(id, param.address()) != 0) {
                throw VerbsException.fromErrno("rdma_connect", "to " + describePeer());
            }
        }
    }

    /**
     * rdma_accept. {@code rnrRetryCount} tells the <em>peer</em> how to retry its sends when we have no receive
     * posted (rdma_connect(3)); 0 makes a missing receive fail the peer's send at once. The retry count passed is
     * always 7; on IB and RoCE the kernel's CM gives the accepted queue pair the connect request's retry count (the
     * peer's) anyway.
     */
    public synchronized void accept(byte[] privateData, int rnrRetryCount) throws VerbsException {
        checkOpen();
        checkPrivateData(privateData, 196, "rdma_accept");
        try (ConnParam param = new ConnParam(privateData, 7, rnrRetryCount)) {
            if (RdmaCm.rdma_accept(id, param.address()) != 0) {
                throw VerbsException.fromErrno("rdma_accept", "from " + describePeer());
            }
        }
    }

    public synchronized void reject(byte[] reason) throws VerbsException {
        checkOpen();
        checkPrivateData(reason, 148, "rdma_reject");
        try (NativeStruct data = new NativeStruct(Math.max(1, reason.length))) {
            data.view().put(0, reason, 0, reason.length);
            if (RdmaCm.rdma_reject(id, reason.length == 0 ? 0 : data.address(), (byte) reason.length) != 0) {
                throw VerbsException.fromErrno("rdma_reject", "from " + describePeer());
            }
        }
    }

    /**
     * rdma_notify(IBV_EVENT_COMM_EST): data arrived on the queue pair before the connection manager saw the
     * connection established (the peer's RTU is late or lost); this establishes it, so that rdma_cm does not go on
     * resending its reply and then give the connection up, and RDMA_CM_EVENT_ESTABLISHED follows. Returns false when
     * rdma_cm had established it already, which is no error: the IB CM answers EISCONN, rdma_cm itself EINVAL once
     * its id left the connecting state (established, or already disconnecting).
     */
    public synchronized boolean notifyCommunicationEstablished() throws VerbsException {
        checkOpen();
        if (RdmaCm.rdma_notify(id, IbvEventType.COMM_EST.ordinal()) != 0) {
            int errno = Errno.last();
            if (errno == Errno.EISCONN || errno == Errno.EINVAL) {
                return false;
            }
            throw VerbsException.fromErrno("rdma_notify(IBV_EVENT_COMM_EST)", "from " + describePeer());
        }
        return true;
    }

    /** rdma_disconnect: the queue pair moves to error and outstanding work requests flush. */
    public synchronized void disconnect() throws VerbsException {
        checkOpen();
        if (RdmaCm.rdma_disconnect(id) != 0) {
            throw VerbsException.fromErrno("rdma_disconnect", "from " + describePeer());
        }
    }

    /** rdma_destroy_qp; the caller has drained (or abandoned) every work request of the queue pair. */
    public synchronized void destroyQueuePair() {
        if (queuePair != null && !queuePair.isDestroyed()) {
            queuePair.markDestroyed();
            RdmaCm.rdma_destroy_qp(id);
        }
    }

    public synchronized InetSocketAddress localAddress() {
        return closed ? null : SocketAddresses.decode(id + Abi.CM_ID_SRC_ADDR);
    }

    public synchronized InetSocketAddress peerAddress() {
        return closed ? null : SocketAddresses.decode(id + Abi.CM_ID_DST_ADDR);
    }

    String describePeer() {
        InetSocketAddress peer = peerAddress();
        return peer == null ? "(unresolved peer)" : SocketAddresses.hostString(peer) + ":" + peer.getPort();
    }

    private void checkOpen() throws VerbsException {
        if (closed) {
            throw new VerbsException("rdma_cm id is destroyed");
        }
    }

    private static void checkPrivateData(byte[] data, int max, String verb) {
        if (data == null || data.length > max) {
            throw new IllegalArgumentException(verb + " private data must be 0.." + max + " bytes, got "
                    + (data == null ? "null" : data.length));
        }
    }

    /**
     * Destroys the queue pair (if still there) and the id. rdma_destroy_id runs outside this id's monitor: the kernel
     * may hold it until the CM messages in flight for the id time out, and a thread that only asks for an address
     * must not wait that long (once {@code closed} is set, nothing here reads the id any more).
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            destroyQueuePair();
            closed = true;
        }
        // Not limited, and no peer can make it repeat: rdma_destroy_id fails only on an id that is not a valid one of
        // ours (a bug), never on what the peer did (a DREQ unanswered makes it wait, not fail), and this package
        // lies below the transport's LogLimiter.
        if (RdmaCm.rdma_destroy_id(id) != 0) {
            org.slf4j.LoggerFactory.getLogger(RdmaCmId.class).warn("rdma_destroy_id failed: {}",
                    Errno.describe(Errno.last()));
        }
    }

    /** struct rdma_conn_param with its private data, alive for the duration of one call. */
    private static final class ConnParam implements AutoCloseable {
        private final NativeStruct param = new NativeStruct(Abi.CONN_PARAM_SIZE);
        private final NativeStruct data;

        ConnParam(byte[] privateData, int retryCount, int rnrRetryCount) {
            if (retryCount < 0 || retryCount > 7 || rnrRetryCount < 0 || rnrRetryCount > 7) {
                throw new IllegalArgumentException("retry counts are 3-bit values 0..7");
            }
            data = new NativeStruct(Math.max(1, privateData.length));
            data.view().put(0, privateData, 0, privateData.length);
            param.putLong(Abi.CONN_PARAM_PRIVATE_DATA, privateData.length == 0 ? 0 : data.address());
            param.putByte(Abi.CONN_PARAM_PRIVATE_DATA_LEN, privateData.length);
            param.putByte(Abi.CONN_PARAM_RESPONDER_RESOURCES, 1);
            param.putByte(Abi.CONN_PARAM_INITIATOR_DEPTH, 1);
            param.putByte(Abi.CONN_PARAM_FLOW_CONTROL, 1);
            param.putByte(Abi.CONN_PARAM_RETRY_COUNT, retryCount);
            param.putByte(Abi.CONN_PARAM_RNR_RETRY_COUNT, rnrRetryCount);
        }

        long address() {
            return param.address();
        }

        @Override
        public void close() {
            param.close();
            data.close();
        }
    }
}
