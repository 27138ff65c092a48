package dev.artemisrdma.verbs;

/**
 * A completion queue with a completion channel of its own (non-blocking fd), shareable by many queue pairs on
 * the same device. One thread polls it. Waiting: arm, then wait on the channel, with a timeout or none; another
 * thread can end a wait early with {@link #wakeUp} (an eventfd polled beside the channel). Channel events are
 * acknowledged in batches, as ibv_get_cq_event(3) recommends.
 */
public final class IbvCompletionQueue implements AutoCloseable {

    private static final int ACK_BATCH = 64;

    private final RdmaDevice device;
    private final long channel;
    private final int channelFd;
    private final long cq;
    private final int capacity;
    private final EventFd wake;
    private final NativeStruct eventCq = new NativeStruct(8);
    private final NativeStruct eventContext = new NativeStruct(8);
    private int unackedEvents;
    private volatile boolean closed;
    /**
     * The one thread that polls and waits on this queue, set by its first poll. Only that thread may destroy the
     * queue while it lives: a destroy from elsewhere could free the queue under a poll in progress (JNI reads it
     * without a lock, which is the point of the data path), so it is refused and the queue kept.
     */
    private volatile Thread poller;

    IbvCompletionQueue(RdmaDevice device, int entries) throws VerbsException {
        if (entries < 1 || entries > device.maxCqe()) {
            throw new IllegalArgumentException("completion queue size must be 1.." + device.maxCqe() + " on "
                    + device.name() + ", got " + entries);
        }
        this.device = device;
        long ch = IbVerbs.ibv_create_comp_channel(device.context());
        if (ch == 0) {
            throw VerbsException.fromErrno("ibv_create_comp_channel", "on " + device.name());
        }
        long created = IbVerbs.ibv_create_cq(device.context(), entries, 0, ch, 0);
        if (created == 0) {
            int errno = Errno.last();
            IbVerbs.ibv_destroy_comp_channel(ch);
            throw new VerbsException("ibv_create_cq", errno, "with " + entries + " entries on " + device.name()
                    + (errno == Errno.ENOMEM ? ": " + MemlockLimit.advice((long) entries * 64) : ""));
        }
        this.channel = ch;
        this.cq = created;
        this.capacity = NativeStruct.readInt(created, Abi.CQ_CQE);
        this.channelFd = NativeStruct.readInt(ch, Abi.COMP_CHANNEL_FD);
        EventFd wakeFd = null;
        try {
            FileDescriptors.setNonBlocking(channelFd, "completion channel");
            wakeFd = new EventFd("a completion queue on " + device.name());
        } catch (VerbsException e) {
            this.wake = null;
            close();
            throw e;
        }
        this.wake = wakeFd;
    }

    public RdmaDevice device() {
        return device;
    }

    /** The native {@code struct ibv_cq}'s address: what an async event about this queue names. */
    public long address() {
        return cq;
    }

    /** The number of entries the device actually gave (at least what was asked for). */
    public int capacity() {
        return capacity;
    }

    /** Polls up to {@code out.capacity()} completions; returns how many. */
    public int poll(WorkCompletions out) throws VerbsException {
        checkOpen();
        claimPoller();
        int n = DataPath.pollCq(cq, out.capacity(), out.address());
        if (n < 0) {
            out.setCount(0);
            throw new VerbsException("ibv_poll_cq", -n, "on a completion queue of " + device.name());
        }
        out.setCount(n);
        return n;
    }

    /**
     * Polls like {@link #poll}, but spins in native code up to {@code spins} times while the queue is empty: for
     * busy-poll loops, where an empty poll through JNI costs more than the completion it waits for.
     */
    public int pollSpinning(WorkCompletions out, int spins) throws VerbsException {
        checkOpen();
        claimPoller();
        if (spins < 1) {
            throw new IllegalArgumentException("spins must be positive");
        }
        int n = DataPath.pollCqSpin(cq, out.capacity(), out.address(), spins);
        if (n < 0) {
            out.setCount(0);
            throw new VerbsException("ibv_poll_cq", -n, "on a completion queue of " + device.name());
        }
        out.setCount(n);
        return n;
    }

    /** Arms the channel for the next completion (ibv_req_notify_cq); poll once more afterwards to close the race. */
    public void requestNotification() throws VerbsException {
        checkOpen();
        int rc = DataPath.reqNotifyCq(cq, 0);
        if (rc != 0) {
            throw new VerbsException("ibv_req_notify_cq", rc, "on " + device.name());
        }
    }

    /**
     * Waits up to {@code timeoutMillis} (negative: without a timeout) for the armed event and consumes it; false on
     * the timeout or when {@link #wakeUp} ended the wait (a wake-up that came before the wait ends it at once).
     */
    public boolean awaitNotification(int timeoutMillis) throws VerbsException {
        checkOpen();
        if (!wake.awaitReadable(channelFd, timeoutMillis)) {
            return false;
        }
        if (IbVerbs.ibv_get_cq_event(channel, eventCq.address(), eventContext.address()) != 0) {
            int errno = Errno.last();
            if (errno == Errno.EAGAIN || errno == Errno.EINTR) {
                return false;
            }
            throw new VerbsException("ibv_get_cq_event", errno, "on " + device.name());
        }
        if (++unackedEvents >= ACK_BATCH) {
            IbVerbs.ibv_ack_cq_events(cq, unackedEvents);
            unackedEvents = 0;
        }
        return true;
    }

    /** Ends the poller's current or next {@link #awaitNotification} early; any thread, also after close. */
    public void wakeUp() {
        EventFd w = wake;
        if (w != null) {
            w.signal();
        }
    }

    public boolean isClosed() {
        return closed;
    }

    private void claimPoller() {
        if (poller != Thread.currentThread()) {
            poller = Thread.currentThread(); // a new poller only after the last one stopped (CompletionLoop)
        }
    }

    private void checkOpen() throws VerbsException {
        if (closed) {
            throw new VerbsException("completion queue on " + device.name() + " is closed");
        }
    }

    /**
     * Destroys the CQ, then its channel; every queue pair using it must be destroyed first. Refused (logged, the
     * queue kept until the process ends) when called on another thread while the thread that polls it still runs.
     */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        Thread t = poller;
        if (t != null && t != Thread.currentThread() && t.isAlive()) {
            org.slf4j.LoggerFactory.getLogger(IbvCompletionQueue.class).warn("completion queue on {} not destroyed: "
                    + "its poller thread {} is still running (it is kept until the process ends)", device.name(),
                    t.getName());
            return;
        }
        closed = true;
        if (cq != 0) {
            if (unackedEvents > 0) {
                IbVerbs.ibv_ack_cq_events(cq, unackedEvents);
                unackedEvents = 0;
            }
            int rc = IbVerbs.ibv_destroy_cq(cq);
            if (rc != 0) {
                org.slf4j.LoggerFactory.getLogger(IbvCompletionQueue.class).warn(
                        "ibv_destroy_cq failed on {}: {} (a queue pair still uses it)", device.name(),
                        Errno.describe(rc));
            }
        }
        int rc = IbVerbs.ibv_destroy_comp_channel(channel);
        if (rc != 0) {
            org.slf4j.LoggerFactory.getLogger(IbvCompletionQueue.class).warn(
                    "ibv_destroy_comp_channel failed on {}: {}", device.name(), Errno.describe(rc));
        }
        if (wake != null) {
            wake.close();
        }
        eventCq.close();
        eventContext.close();
    }
}
