package dev.artemisrdma.verbs;

/**
 * A shared receive queue (ibv_create_srq) on a device's protection domain. Receives are posted with one
 * ibv_post_srq_recv call per list, through the JNI shim. Destroy it after every queue pair created on it and before
 * the memory its receives point into (ibv_destroy_srq returns EBUSY while a queue pair still uses it).
 */
public final class IbvSharedReceiveQueue implements AutoCloseable {

    /** IBV_SRQ_LIMIT, the attribute mask of ibv_modify_srq that arms the limit event. */
    private static final int IBV_SRQ_LIMIT = 2;

    private final RdmaDevice device;
    private final long srq;
    private final int capacity;
    private final NativeStruct badWr = new NativeStruct(8);
    private volatile boolean destroyed;

    IbvSharedReceiveQueue(RdmaDevice device, int maxWr) throws VerbsException {
        if (device.maxSrq() <= 0) {
            throw new VerbsException("ibv_create_srq: device " + device.name() + " supports no shared receive queue"
                    + " (max_srq 0)");
        }
        if (maxWr < 1 || maxWr > device.maxSrqWr()) {
            throw new VerbsException("ibv_create_srq: " + maxWr + " receives is outside 1.." + device.maxSrqWr()
                    + " (max_srq_wr of " + device.name() + ")");
        }
        this.device = device;
        try (NativeStruct attr = new NativeStruct(Abi.SRQ_INIT_ATTR_SIZE)) {
            attr.putInt(Abi.SRQ_INIT_ATTR_MAX_WR, maxWr);
            attr.putInt(Abi.SRQ_INIT_ATTR_MAX_SGE, 1);
            attr.putInt(Abi.SRQ_INIT_ATTR_SRQ_LIMIT, 0);
            long created = IbVerbs.ibv_create_srq(device.pd(), attr.address());
            if (created == 0) {
                int errno = Errno.last();
                throw new VerbsException("ibv_create_srq", errno, "with " + maxWr + " receives on " + device.name());
            }
            if (NativeStruct.readPointer(created, Abi.SRQ_CONTEXT) != device.context()) {
                IbVerbs.ibv_destroy_srq(created);
                throw new RdmaSetupException("ibv_create_srq returned a queue whose layout does not match the binding"
                        + " (ibv_srq.context != the device's context): unsupported rdma-core ABI");
            }
            this.srq = created;
            // the device writes back what it actually gave (max_wr rounded up)
            this.capacity = Math.max(maxWr, attr.getInt(Abi.SRQ_INIT_ATTR_MAX_WR));
        }
    }

    public RdmaDevice device() {
        return device;
    }

    /** The native {@code struct ibv_srq}'s address: what an async event about this queue names. */
    public long address() {
        return srq;
    }

    public int capacity() {
        return capacity;
    }

    /** Posts every receive of {@code list} with one ibv_post_srq_recv call. */
    public void postRecv(RecvRequests list) throws VerbsException {
        if (destroyed) {
            throw new VerbsException("ibv_post_srq_recv: shared receive queue on " + device.name()
                    + " is destroyed");
        }
        int n = list.size();
        if (n == 0) {
            return;
        }
        badWr.putLong(0, 0);
        int rc = DataPath.postSrqRecv(srq, list.link(), badWr.address());
        if (rc != 0) {
            int failedAt = list.indexOf(badWr.getLong(0));
            int posted = failedAt < 0 ? 0 : failedAt;
            throw new PostFailedException("ibv_post_srq_recv", rc, "on a shared receive queue of " + device.name()
                    + " (" + posted + " of " + n + " posted)", posted);
        }
    }

    /** Arms IBV_EVENT_SRQ_LIMIT_REACHED for when fewer than {@code limit} receives remain posted (one-shot). */
    public void armLimit(int limit) throws VerbsException {
        if (destroyed) {
            throw new VerbsException("ibv_modify_srq: shared receive queue is destroyed");
        }
        try (NativeStruct attr = new NativeStruct(Abi.SRQ_ATTR_SIZE)) {
            attr.putInt(Abi.SRQ_ATTR_SRQ_LIMIT, limit);
            int rc = IbVerbs.ibv_modify_srq(srq, attr.address(), IBV_SRQ_LIMIT);
            if (rc != 0) {
                throw new VerbsException("ibv_modify_srq", rc, "arming the limit " + limit + " on " + device.name());
            }
        }
    }

    /**
     * ibv_destroy_srq; idempotent. When it fails (EBUSY: a queue pair still uses it) the queue stays alive with its
     * receives posted: {@link #isDestroyed()} stays false, and the memory they point into must not be deregistered.
     */
    @Override
    public synchronized void close() {
        if (destroyed) {
            return;
        }
        int rc = IbVerbs.ibv_destroy_srq(srq);
        if (rc != 0) {
            org.slf4j.LoggerFactory.getLogger(IbvSharedReceiveQueue.class).error(
                    "ibv_destroy_srq failed on {}: {} (a queue pair still uses it?); its memory stays registered",
                    device.name(), Errno.describe(rc));
            return;
        }
        destroyed = true;
    }

    public boolean isDestroyed() {
        return destroyed;
    }
}
