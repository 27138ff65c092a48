package dev.artemisrdma.transport.channel;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.RegisteredMemory;
import dev.artemisrdma.transport.flow.BufferPool;
import dev.artemisrdma.transport.loop.CompletionLoop;
import dev.artemisrdma.transport.loop.LoopChannel;

/**
 * The native objects one channel owns, and the order they go in. They are children of its device and its completion
 * loop: a slot of the loop (a share of its completion queue, and of its shared receive pool when the channel takes
 * receives from it), one registration (receive slots unless shared, then the send headers), and the queue pair,
 * whose work requests point into that registration and complete on that queue.
 *
 * <p>Created in that order ({@link #bind}, then {@link #attach}); destroyed in the reverse, in one place
 * ({@link #release}): the queue pair first (nothing points into the memory after it), then the memory, then the loop
 * slot (the last child of the loop's queue), so that a loop never destroys its queue under a queue pair. A queue pair
 * the fabric is still creating from this channel's spec keeps the slot taken (see {@link #queuePairPending}).
 *
 * <p>Owner: the channel's lock; every method runs under it. {@link #qpNumber} and {@link #pool} are also read
 * without it, by the completion loop and by writers allocating send buffers, and {@link #loop} by whoever asks the
 * loop to run a request ({@link ChannelCommands}). Monitoring and tests read {@link #registeredBytes},
 * {@link #queuePair} and {@link #receivesOutstanding} without it (each the value of its last change).
 */
final class ChannelResources {

    private final String id;
    /** The send buffer pool of the channel's device (chosen before bind on the passive side). */
    private volatile BufferPool pool;
    /** The device the passive side bound to before its accept; null when the queue pair's set-up binds. */
    private FabricDevice boundEarly;
    /** Written under the lock at bind; volatile for {@link ChannelCommands}, which posts to it without the lock. */
    private volatile CompletionLoop loop;
    private int index = -1;
    private int reservedEntries;
    /** Written under the lock at bind and release; volatile for monitoring ({@link #registeredBytes}). */
    private volatile RegisteredMemory memory;
    /** Written under the lock at attach; volatile for the transport's {@code whenGone}, which reads it without. */
    private volatile QueuePair qp;
    private volatile int qpNumber = -1;
    /**
     * Receives posted on our own queue pair and not yet completed (0 on a shared pool). Written under the lock by
     * the loop, at most once per batch and once per repost group (never per frame), with a release store (a plain
     * store on x86: no fence on the data path); read with an acquire load by the tests' and diagnostics' readers,
     * which do not take the lock ({@link #RECEIVES_OUTSTANDING}).
     */
    private int receivesOutstanding;
    /**
     * Consumed receive slots waiting for their repost group, as the loop's last batch left them (the list itself is
     * the loop thread's, appended to without the lock): published once per batch, when it changed, the same way.
     */
    private int awaitingRepost;
    private static final VarHandle RECEIVES_OUTSTANDING;
    private static final VarHandle AWAITING_REPOST;

    static {
        try {
            MethodHandles.Lookup lookup = MethodHandles.lookup();
            RECEIVES_OUTSTANDING = lookup.findVarHandle(ChannelResources.class, "receivesOutstanding", int.class);
            AWAITING_REPOST = lookup.findVarHandle(ChannelResources.class, "awaitingRepost", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }
    /**
     * The fabric is creating a queue pair on the loop's queues from this channel's spec, or has not yet said what
     * became of it: until it hands the queue pair over ({@link #attach}) or the connect or accept has failed
     * ({@link #setupEnded}), the loop slot stays taken even if the channel is released meanwhile.
     */
    private boolean queuePairPending;

    ChannelResources(String id) {
        this.id = id;
    }

    void usePool(BufferPool pool) {
        this.pool = pool;
    }

    BufferPool pool() {
        return pool;
    }

    /**
     * Takes a completion loop slot of {@code entries} on {@code device} and registers {@code registrationBytes}
     * there; on a failure nothing stays taken. {@code early}: the passive side binds before its accept.
     */
    void bind(ChannelHost transport, LoopChannel channel, FabricDevice device, int entries,
              int registrationBytes, SharedReceiveMembership shared, boolean early) throws FabricException {
        if (boundEarly != null) {
            if (boundEarly != device) {
                throw new FabricException("channel " + id + " was bound to " + boundEarly.name() + " but its queue "
                        + "pair is asked for on " + device.name());
            }
            return;
        }
        if (loop != null) {
            throw new IllegalStateException("channel " + id + " already bound");
        }
        if (pool == null) {
            pool = transport.pool(device);
        }
        reservedEntries = entries;
        CompletionLoop.Assignment a = transport.assignLoop(device, channel, entries);
        loop = a.loop();
        index = a.index();
        try {
            memory = device.register(registrationBytes);
        } catch (FabricException | RuntimeException e) {
            shared.release();
            loop.unregister(index, reservedEntries);
            loop = null;
            index = -1;
            throw e;
        }
        if (early) {
            boundEarly = device;
        }
    }

    /** The fabric was given this channel's queue pair spec: it creates a queue pair on the loop's queues now. */
    void queuePairPending() {
        queuePairPending = true;
    }

    /**
     * The queue pair the fabric hands over: this channel's from now on, whatever follows. A failed loop refuses it
     * (its queue outlives us only until we let go); the abort that follows destroys it.
     */
    void attach(QueuePair queuePair) throws FabricException {
        queuePairPending = false;
        qp = queuePair;
        qpNumber = queuePair.qpNumber();
        if (loop.failure() != null) {
            throw loop.failure();
        }
    }

    /** A queue pair handed over to a channel already released: destroyed at once, and the slot it held goes. */
    void refuse(QueuePair queuePair) {
        queuePairPending = false;
        queuePair.close();
        releaseSlot();
    }

    /** The connect or accept failed: a queue pair the fabric was creating is gone, or ours to abort. */
    void setupEnded(boolean released) {
        queuePairPending = false;
        if (released) {
            releaseSlot();
        }
    }

    CompletionLoop loop() {
        return loop;
    }

    int index() {
        return index;
    }

    RegisteredMemory memory() {
        return memory;
    }

    QueuePair queuePair() {
        return qp;
    }

    int qpNumber() {
        return qpNumber;
    }

    /** Whether a loop slot was taken (so a loop thread will release the channel, unless that loop is gone). */
    boolean bound() {
        return index >= 0;
    }

    /** Whether the channel's loop died: it polls nothing any more, so nothing is left to drain or wait for. */
    boolean loopFailed() {
        return loop != null && loop.failure() != null;
    }

    /** Whether the calling thread is the channel's loop. */
    boolean onLoopThread() {
        return loop != null && loop.isLoopThread();
    }

    /** Has the loop tick the channel soon: a deadline was started from another thread. */
    void wakeLoop() {
        CompletionLoop l = loop;
        if (l != null && !l.isLoopThread()) {
            l.wake();
        }
    }

    /** Any thread, without the lock: the count as the last change under the lock left it. */
    int receivesOutstanding() {
        return (int) RECEIVES_OUTSTANDING.getAcquire(this);
    }

    void receivesPosted(int n) {
        if (n != 0) {
            RECEIVES_OUTSTANDING.setRelease(this, receivesOutstanding + n);
        }
    }

    void receivesCompleted(int n) {
        if (n != 0) {
            RECEIVES_OUTSTANDING.setRelease(this, receivesOutstanding - n);
        }
    }

    /** The loop's batch ended with {@code waiting} consumed slots left for their repost group (loop thread). */
    void awaitingRepost(int waiting) {
        if (waiting != awaitingRepost) {
            AWAITING_REPOST.setRelease(this, waiting);
        }
    }

    /**
     * Receives posted plus those waiting for their repost group, as the loop's last batch left them; any thread,
     * without the lock. During a batch: the count before it.
     */
    int receivesPostedOrAwaitingRepost() {
        return (int) RECEIVES_OUTSTANDING.getAcquire(this) + (int) AWAITING_REPOST.getAcquire(this);
    }

    /** Disconnect: every posted work request now completes (flushes). */
    void disconnect() {
        if (qp != null) {
            qp.disconnect();
        }
    }

    /** Destroys the queue pair; no completion of its work requests will be waited for. */
    void destroyQueuePair() {
        if (qp != null) {
            qp.close();
            RECEIVES_OUTSTANDING.setRelease(this, 0);
        }
    }

    /**
     * Releases the rest, in tree order, once the queue pair is destroyed (or there never was one): what its work
     * requests pointed at (send and receive buffers), the shared pool's credits, the memory, then the loop slot.
     * On the loop thread, or when no loop thread polls for the channel any more.
     */
    void release(SendSide send, ReceiveSide receive, SharedReceiveMembership shared, LoopChannel channel) {
        send.releaseAll();
        receive.release();
        if (shared.isMember()) {
            shared.release(); // after the queue pair is destroyed: no SEND can take one now
            if (loop != null) {
                loop.unmapQueuePair(qpNumber, channel);
            }
        }
        if (memory != null) {
            memory.close();
            memory = null;
        }
        if (!queuePairPending) {
            releaseSlot();
        }
    }

    private void releaseSlot() {
        if (loop != null && index >= 0) {
            loop.unregister(index, reservedEntries);
            index = -1;
        }
    }

    /** Bytes registered now (receive slots and send headers); 0 before bind and after release. */
    long registeredBytes() {
        RegisteredMemory m = memory;
        return m == null ? 0 : m.length();
    }
}
