package dev.artemisrdma.transport.flow;

import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicInteger;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.api.SendBuffer;
import dev.artemisrdma.transport.fabric.RegisteredMemory;

/**
 * A send buffer carved from a registered slab (or, for very large frames, a registration of its own). While a
 * channel owns it, it also records the frame's progress through fragmentation, so queuing it allocates nothing.
 *
 * <p>Callers never hold the buffer itself but a {@link Lease}: one per hand-out, stamped with the generation it was
 * handed out in. The buffer's state word carries the generation too, so a lease's late second {@code release()} (or
 * a write of a buffer already released) finds another generation and does nothing, instead of freeing the buffer
 * that a new owner now holds.
 *
 * <p>Threads: the buffer passes between threads, and its state word (an atomic, changed only by compare-and-set)
 * says who holds it, so exactly one hand-out, transfer or release wins whichever threads race: the lease holder's
 * thread, a writer handing it to a channel, the completion loop releasing it. The frame bookkeeping
 * ({@link #startFrame}, {@link #sentTo}) belongs to the channel that holds it: the writer sets it once before
 * queuing the buffer under the channel's lock, and from then on only code holding that lock reads or moves it.
 */
public final class PooledBuffer {

    static final int FREE = 0;
    static final int USER = 1;
    static final int CHANNEL = 2;
    private static final int STATE_BITS = 2;
    private static final int STATE_MASK = (1 << STATE_BITS) - 1;

    private final BufferPool pool;
    private final BufferPool.SizeClass owner;
    private final RegisteredMemory dedicated;
    private final ByteBuffer view;
    /** The {@link BufferPool#HEADROOM} registered bytes right before {@link #view}, for a SEND's frame header. */
    private final ByteBuffer headroom;
    private final long address;
    private final int lkey;
    /** generation << STATE_BITS | state; the generation advances on every hand-out (a stale lease would have to
     * outlive 2^30 hand-outs of the same buffer to match again). */
    private final AtomicInteger state = new AtomicInteger(FREE);

    /**
     * The slab of its size class it was carved from (null for a dedicated registration), so that taking and freeing
     * it finds its slab's count at once.
     */
    final BufferPool.Slab slab;

    /** Frame bookkeeping, valid while a channel owns the buffer (guarded by the channel's lock). */
    private int frameLength;
    private int sentOffset;

    /** {@code owner} and {@code carvedFrom} null: a dedicated registration, {@code slab}, for one large frame. */
    PooledBuffer(BufferPool pool, BufferPool.SizeClass owner, BufferPool.Slab carvedFrom, RegisteredMemory slab,
                 int offset, int capacity) {
        this.pool = pool;
        this.owner = owner;
        this.slab = carvedFrom;
        this.dedicated = owner == null ? slab : null;
        ByteBuffer whole = slab.buffer().duplicate();
        whole.limit(offset + capacity).position(offset);
        this.view = whole.slice();
        ByteBuffer front = slab.buffer().duplicate();
        front.limit(offset).position(offset - BufferPool.HEADROOM);
        this.headroom = front.slice();
        this.address = slab.address() + offset;
        this.lkey = slab.lkey();
    }

    public ByteBuffer buffer() {
        return view;
    }

    /** The channel took the buffer as a frame of {@code length} bytes, none of them posted yet. */
    public void startFrame(int length) {
        frameLength = length;
        sentOffset = 0;
    }

    public int frameLength() {
        return frameLength;
    }

    /** Bytes of the frame already posted (fragments go out in order). */
    public int sentOffset() {
        return sentOffset;
    }

    public void sentTo(int offset) {
        sentOffset = offset;
    }

    /**
     * The registered bytes right before {@link #buffer()}: a SEND from the buffer's first byte writes its frame
     * header at the end of them, so header and payload are one scatter-gather entry. Never seen by callers.
     */
    public ByteBuffer headroom() {
        return headroom;
    }

    public BufferPool pool() {
        return pool;
    }

    public long address() {
        return address;
    }

    public int lkey() {
        return lkey;
    }

    int capacity() {
        return view.capacity();
    }

    /** Large frames get memory registered for them alone; it is deregistered when they are done. */
    public boolean isDedicated() {
        return dedicated != null;
    }

    /** Hands the buffer to a caller: cleared, position 0, under a new generation. */
    Lease acquire() {
        return new Lease(this, handOut(USER));
    }

    /**
     * Hands the buffer straight to a channel (no caller holds it, so no lease): cleared, position 0, under a new
     * generation, so that a lease of an earlier hand-out still finds another generation and does nothing.
     */
    void acquireForChannel() {
        handOut(CHANNEL);
    }

    private int handOut(int owner) {
        int current = state.get();
        int next = ((current >>> STATE_BITS) + 1) << STATE_BITS | owner;
        if ((current & STATE_MASK) != FREE || !state.compareAndSet(current, next)) {
            throw new IllegalStateException("pooled buffer handed out twice");
        }
        view.clear();
        return next;
    }

    /** The caller gives the buffer to a channel for sending; false when the lease is not the current one. */
    private boolean transferToChannel(int leased) {
        return state.compareAndSet(leased, (leased & ~STATE_MASK) | CHANNEL);
    }

    /** The caller's release: a no-op after a write (the channel owns it) or for a lease already released. */
    private void release(int leased) {
        if (state.compareAndSet(leased, (leased & ~STATE_MASK) | FREE)) {
            recycle();
        }
    }

    /** The channel is done with it: every work request pointing into it has completed. */
    public void releaseFromChannel() {
        int current = state.get();
        if ((current & STATE_MASK) == CHANNEL && state.compareAndSet(current, (current & ~STATE_MASK) | FREE)) {
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

    /** One hand-out of a pooled buffer: what {@link RdmaChannel#allocate} returns. */
    public static final class Lease implements SendBuffer {
        private final PooledBuffer buffer;
        private final int stamp;

        private Lease(PooledBuffer buffer, int stamp) {
            this.buffer = buffer;
            this.stamp = stamp;
        }

        public PooledBuffer pooled() {
            return buffer;
        }

        @Override
        public ByteBuffer buffer() {
            return buffer.view;
        }

        /** Moves the buffer to a channel; false when this lease was already written or released. */
        public boolean transferToChannel() {
            return buffer.transferToChannel(stamp);
        }

        @Override
        public void release() {
            buffer.release(stamp);
        }
    }
}
