package dev.artemisrdma.verbs;

/**
 * One RDMA device context (opened and owned by librdmacm) with a protection domain of ours, so memory can be
 * registered before any connection exists. Limits come from ibv_query_device / ibv_query_port, never constants.
 *
 * <p>Threads: {@link RdmaDevices} owns it: it opens and closes it, under its own lock. Any thread reads its limits
 * (final from construction), registers memory and creates queues on it; the inline probe runs once, under this
 * object's lock. {@code closed} is written only under the owner's lock but read without one ({@link #isClosed},
 * {@link #isPortActive}, the checks before registering), so a thread that races a release may see it open.
 */
public final class RdmaDevice implements AutoCloseable {

    private final long context;
    private final long pd;
    private final String name;
    private final int maxQpWr;
    private final int maxSge;
    private final int maxCqe;
    private final long maxMrSize;
    private final int activeMtu;
    private final int maxSrq;
    private final int maxSrqWr;
    private final int transportType;
    /** Found by {@link InlineProbe} on first ask; {@link #INLINE_NOT_PROBED} until then. */
    private int maxInlineData = INLINE_NOT_PROBED;
    /** Written under RdmaDevices' lock; read without it by port checks on other threads (VerbsFabric). */
    private volatile boolean closed;

    private static final int INLINE_NOT_PROBED = Integer.MIN_VALUE;

    RdmaDevice(long context) throws VerbsException {
        NativeStruct.requireNonNull(context, "ibv_context");
        this.context = context;
        long ibvDevice = NativeStruct.readPointer(context, Abi.CONTEXT_DEVICE);
        this.name = NativeStruct.readString(IbVerbs.ibv_get_device_name(ibvDevice));
        this.transportType = NativeStruct.readInt(ibvDevice, Abi.DEVICE_TRANSPORT_TYPE);
        try (NativeStruct attr = new NativeStruct(Abi.DEVICE_ATTR_SIZE);
             NativeStruct port = new NativeStruct(Abi.PORT_ATTR_BUFFER)) {
            int rc = IbVerbs.ibv_query_device(context, attr.address());
            if (rc != 0) {
                throw new VerbsException("ibv_query_device", rc, "on " + name);
            }
            maxQpWr = attr.getInt(Abi.DEVICE_ATTR_MAX_QP_WR);
            maxSge = attr.getInt(Abi.DEVICE_ATTR_MAX_SGE);
            maxCqe = attr.getInt(Abi.DEVICE_ATTR_MAX_CQE);
            maxMrSize = attr.getLong(Abi.DEVICE_ATTR_MAX_MR_SIZE);
            maxSrq = attr.getInt(Abi.DEVICE_ATTR_MAX_SRQ);
            maxSrqWr = attr.getInt(Abi.DEVICE_ATTR_MAX_SRQ_WR);
            rc = IbVerbs.ibv_query_port(context, (byte) 1, port.address());
            if (rc != 0) {
                throw new VerbsException("ibv_query_port", rc, "on " + name + " port 1");
            }
            activeMtu = mtuBytes(port.getInt(Abi.PORT_ATTR_ACTIVE_MTU));
        }
        long allocated = IbVerbs.ibv_alloc_pd(context);
        if (allocated == 0) {
            throw VerbsException.fromErrno("ibv_alloc_pd", "on " + name);
        }
        pd = allocated;
    }

    private static int mtuBytes(int ibvMtu) {
        return ibvMtu >= 1 && ibvMtu <= 5 ? 128 << ibvMtu : 0;
    }

    public String name() {
        return name;
    }

    /**
     * Whether SENDs may carry immediate data: InfiniBand and RoCE devices (IBV_TRANSPORT_IB) do; iWARP ones (siw,
     * and iWARP NICs) refuse IBV_WR_SEND_WITH_IMM as an invalid opcode.
     */
    public boolean supportsImmediateData() {
        return transportType == IBV_TRANSPORT_IB;
    }

    private static final int IBV_TRANSPORT_IB = 0;

    /** enum ibv_transport_type: 0 InfiniBand (and RoCE), 1 iWARP, 2 and 3 usNIC, 4 unspecified (AWS EFA). */
    public int transportType() {
        return transportType;
    }

    /**
     * The most inline bytes a reliable-connected queue pair of two send scatter-gather entries accepts here; -1 when
     * no such queue pair can be created at all. ibv_query_device does not say: the first call asks the device with
     * throw-away queue pairs ({@link InlineProbe}), later calls answer from memory.
     */
    public synchronized int maxInlineData() {
        checkOpen();
        if (maxInlineData == INLINE_NOT_PROBED) {
            maxInlineData = InlineProbe.maxInlineData(this);
        }
        return maxInlineData;
    }

    long context() {
        return context;
    }

    /** The context's async event fd (ibv_get_async_event reads it). */
    int asyncFd() {
        return NativeStruct.readInt(context, Abi.CONTEXT_ASYNC_FD);
    }

    public boolean isClosed() {
        return closed;
    }

    private static final int IBV_PORT_ACTIVE = Abi.PORT_ACTIVE_STATE;

    /** Whether {@code port} is ACTIVE now (ibv_query_port; the kernel's state, ahead of the async event). */
    public boolean isPortActive(int port) {
        if (closed || port < 1 || port > 255) {
            return false;
        }
        try (NativeStruct attr = new NativeStruct(Abi.PORT_ATTR_BUFFER)) {
            return IbVerbs.ibv_query_port(context, (byte) port, attr.address()) == 0
                    && attr.getInt(Abi.PORT_ATTR_STATE) == IBV_PORT_ACTIVE;
        }
    }

    long pd() {
        checkOpen();
        return pd;
    }

    public int maxQpWr() {
        return maxQpWr;
    }

    public int maxSge() {
        return maxSge;
    }

    public int maxCqe() {
        return maxCqe;
    }

    public long maxMrSize() {
        return maxMrSize;
    }

    /** The active MTU of port 1 in bytes. */
    public int activeMtu() {
        return activeMtu;
    }

    /** Allocates and registers a page-aligned slab (local write access only). */
    public IbvMemoryRegion register(long bytes) throws VerbsException {
        checkOpen();
        return new IbvMemoryRegion(this, bytes);
    }

    /** Shared receive queues the device supports (0: none). */
    public int maxSrq() {
        return maxSrq;
    }

    public int maxSrqWr() {
        return maxSrqWr;
    }

    /** A shared receive queue on our protection domain for {@code maxWr} receives of one scatter-gather entry. */
    public IbvSharedReceiveQueue createSharedReceiveQueue(int maxWr) throws VerbsException {
        checkOpen();
        return new IbvSharedReceiveQueue(this, maxWr);
    }

    public IbvCompletionQueue createCompletionQueue(int entries) throws VerbsException {
        checkOpen();
        return new IbvCompletionQueue(this, entries);
    }

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException("device " + name + " is closed");
        }
    }

    /** Deallocates the protection domain; every memory region and queue pair on it must be gone. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        int rc = IbVerbs.ibv_dealloc_pd(pd);
        if (rc != 0) {
            org.slf4j.LoggerFactory.getLogger(RdmaDevice.class).warn(
                    "ibv_dealloc_pd failed on {}: {} (something still uses the protection domain)", name,
                    Errno.describe(rc));
        }
    }

    @Override
    public String toString() {
        return name + "(context 0x" + Long.toHexString(context) + ")";
    }
}
