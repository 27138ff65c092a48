package dev.artemisrdma.transport.channel;

import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.flow.PooledBuffer;

/**
 * The send work requests of one queue pair that are posted and not yet known complete, in posting order, and the
 * send budget they draw on. Each owns a ring slot: its header lives in the slot's
 * {@link TransportConfig#SEND_HEADER_STRIDE} bytes of the connection's header area, and the slot records the buffer to
 * release once the request completes (the last fragment of a frame carries it), so everything a posted request points
 * at stays referenced until then.
 *
 * <p>Signalling is selective: sends on one queue pair complete in order, so one signaled completion retires every
 * unsignaled request before it. A request is signaled when {@code interval} have gone unsignaled, when the budget
 * runs low (the last free slots must produce a completion, or the ring would never drain), or when the caller
 * forces it. Not thread-safe: the channel's lock guards it.
 */
final class SendRing {

    private final int capacity;
    private final int interval;
    private final int lowWater;
    private final PooledBuffer[] release;
    private final boolean[] signaled;
    /** Payload bytes of each outstanding request, and their sum: what the ring holds unsent-as-far-as-we-know. */
    private final int[] bytes;
    private long bytesOutstanding;
    private long posted;
    private long retired;
    /** posted % capacity and retired % capacity, kept as they advance: a division costs more than a frame's
     * bookkeeping where integer division is emulated (the lab) and is never free. */
    private int postSlot;
    private int retireSlot;
    private int unsignaledRun;
    private int signaledOutstanding;

    SendRing(int capacity, int interval) {
        if (capacity < 1 || interval < 1) {
            throw new IllegalArgumentException("capacity " + capacity + ", interval " + interval);
        }
        this.capacity = capacity;
        this.interval = Math.min(interval, capacity);
        // the claim that leaves fewer than lowWater (>= 1) slots free is signaled, so a full ring always drains
        this.lowWater = Math.max(1, Math.min(this.interval, capacity / 4));
        this.release = new PooledBuffer[capacity];
        this.signaled = new boolean[capacity];
        this.bytes = new int[capacity];
    }

    int capacity() {
        return capacity;
    }

    int free() {
        return capacity - (int) (posted - retired);
    }

    int outstanding() {
        return (int) (posted - retired);
    }

    int signaledOutstanding() {
        return signaledOutstanding;
    }

    /** Payload bytes of the requests outstanding (posted, not yet known complete). */
    long bytesOutstanding() {
        return bytesOutstanding;
    }

    /** The slot the next request will take. */
    int nextSlot() {
        return postSlot;
    }

    /**
     * Claims the next slot for a request; returns whether it must be signaled. {@code toRelease} (may be null) is
     * released once the request completes.
     */
    boolean claim(PooledBuffer toRelease, boolean forceSignal) {
        return claim(toRelease, forceSignal, 0);
    }

    /** As {@link #claim(PooledBuffer, boolean)} for a request carrying {@code payload} bytes of data. */
    boolean claim(PooledBuffer toRelease, boolean forceSignal, int payload) {
        if (free() == 0) {
            throw new IllegalStateException("send budget exhausted");
        }
        int slot = postSlot;
        posted++;
        postSlot = next(slot);
        boolean signal = forceSignal || ++unsignaledRun >= interval || free() < lowWater;
        if (signal) {
            unsignaledRun = 0;
            signaledOutstanding++;
        }
        release[slot] = toRelease;
        signaled[slot] = signal;
        bytes[slot] = payload;
        bytesOutstanding += payload;
        return signal;
    }

    /**
     * Makes the most recent claim signaled if it was not: a writer streaming frames wants a completion to hold its
     * next flushes behind (see {@link SendSide#flush}). Returns whether it changed anything.
     */
    boolean signalLast() {
        int slot = postSlot == 0 ? capacity - 1 : postSlot - 1;
        if (outstanding() == 0 || signaled[slot]) {
            return false;
        }
        signaled[slot] = true;
        signaledOutstanding++;
        unsignaledRun = 0;
        return true;
    }

    /**
     * Takes back the most recent claim after its post failed before reaching the queue pair; returns the buffer
     * it was to release (null if none), which is not released here: earlier posted fragments may point into it.
     */
    PooledBuffer unclaimLast() {
        posted--;
        int slot = postSlot == 0 ? capacity - 1 : postSlot - 1;
        postSlot = slot;
        if (signaled[slot]) {
            signaledOutstanding--;
        }
        PooledBuffer b = release[slot];
        release[slot] = null;
        signaled[slot] = false;
        bytesOutstanding -= bytes[slot];
        bytes[slot] = 0;
        return b;
    }

    /**
     * A completion (of any status) for {@code slot} arrived: it and every request before it are done. Returns how
     * many were retired (0 for a slot that is not outstanding).
     */
    int retireThrough(int slot) {
        int outstanding = outstanding();
        int distance = slot >= retireSlot ? slot - retireSlot : slot - retireSlot + capacity;
        if (slot < 0 || slot >= capacity || distance >= outstanding) {
            return 0;
        }
        for (int i = 0; i <= distance; i++) {
            retire(retireSlot);
            retireSlot = next(retireSlot);
            retired++;
        }
        return distance + 1;
    }

    /** Releases what every remaining request held; only once the queue pair is destroyed. */
    void retireAll() {
        while (retired < posted) {
            retire(retireSlot);
            retireSlot = next(retireSlot);
            retired++;
        }
    }

    private int next(int slot) {
        return slot + 1 == capacity ? 0 : slot + 1;
    }

    private void retire(int s) {
        bytesOutstanding -= bytes[s];
        bytes[s] = 0;
        if (signaled[s]) {
            signaled[s] = false;
            signaledOutstanding--;
        }
        PooledBuffer b = release[s];
        if (b != null) {
            release[s] = null;
            b.releaseFromChannel();
        }
    }
}
