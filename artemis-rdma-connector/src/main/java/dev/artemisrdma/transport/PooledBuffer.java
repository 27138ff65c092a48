package dev.artemisrdma.transport;

import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A send buffer carved from a registered slab (or, for very large frames, a registration of its own). While a
 * channel owns it, it also records the frame's progress through fragmentation, so queuing it allocates nothing.
 */
final class PooledBuffer implements SendBuffer {

    static final int FREE = 0;
    static final int USER = 1;
    static final int CHANNEL = 2;

    private final BufferPool pool;
    private final BufferPool.SizeClass owner;
    private final RegisteredMemory dedicated;
    private final ByteBuffer view;
    private final long address;
    private final int lkey;
    private final AtomicInteger state = new AtomicInteger(FREE);

    /** Frame bookkeeping, valid while a channel owns the buffer (guarded by the channel's lock). */
    int frameLength;
    int sentOffset;

    PooledBuffer(BufferPool pool, BufferPool.SizeClass owner, RegisteredMemory slab, int offset, int capacity) {
        this.pool = pool;
        this.owner = owner;
        this.dedicated = owner == null ? slab : null;
        ByteBuffer whole = slab.buffer().duplicate();
        whole.limit(offset + capacity).position(offset);
        this.view = whole.slice();
        this.address = slab.address() + offset;
        this.lkey = slab.lkey();
    }

    @Override
    public ByteBuffer buffer() {
        return view;
    }

    BufferPool pool() {
        return pool;
    }

    long address() {
        return address;
    }

    int lkey() {
        return lkey;
    }

    int capacity() {
        return view.capacity();
    }

    /** Large frames get memory registered for them alone; it is deregistered when they are done. */
    boolean isDedicated() {
        return dedicated != null;
    }

    /** Hands the buffer to a caller: cleared, position 0. */
    void acquire() {
        if (!state.compareAndSet(FREE, USER)) {
            throw new IllegalStateException("pooled buffer handed out twice");
        }
        view.clear();
    }

    /** The caller gives the buffer to a channel for sending; false when it was not the caller's any more. */
    boolean transferToChannel() {
        return state.compareAndSet(USER, CHANNEL);
    }

    @Override
    public void release() {
        // a caller's release after write() is a no-op: the channel owns the buffer until its send completes
        if (state.compareAndSet(USER, FREE)) {
            recycle();
        }
    }

    /** The channel is done with it: every work request pointing into it has completed. */
    void releaseFromChannel() {
        if (state.compareAndSet(CHANNEL, FREE)) {
            recycle();
        }
    }

    private void recycle() {
        if (dedicated != null) {
            dedicated.close();
        } else {
            owner.free(this);
        }
    }
}
