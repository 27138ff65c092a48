/*
 * Fakes a completion queue with its completion channel (ibv_cq + ibv_comp_channel), and its entries ({@link Cqe}).
 * Enforces: concurrent polls, polling or arming a destroyed queue, overrun (fatal: every poll throws), destroying it
 * while queue pairs still use it (refused, as ibv_destroy_cq refuses it with EBUSY: closed for its user but live and
 * leaked, as with our binding); notification wakes only for completions after requestNotification. State: entries
 * and flags are guarded by the fabric's lock (the wire thread pushes under it), {@code signal} is a condition of that
 * lock; one thread polls it.
 */
package dev.artemisrdma.transport;

import java.util.ArrayDeque;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.Condition;

import dev.artemisrdma.transport.fabric.CompletionQueue;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.FabricException;

final class FakeCq implements CompletionQueue {
    /** A completion waiting in the queue. */
    record Cqe(FakeQp qp, long wrId, int status, int opcode, int length, boolean recv, int sqFree,
               long immediate, int landedLkey) {
        /** {@code landedLkey}: the lkey of the receive a SEND's data was written into (0 for any other completion). */
        Cqe(FakeQp qp, long wrId, int status, int opcode, int length, boolean recv, int sqFree) {
            this(qp, wrId, status, opcode, length, recv, sqFree, Completions.NO_IMMEDIATE, 0);
        }
    }

    private final FakeFabric fabric;
    final FakeDevice device;
    final int capacity;
    final ArrayDeque<Cqe> entries = new ArrayDeque<>();
    final Condition signal;
    final Set<FakeQp> users = ConcurrentHashMap.newKeySet();
    final AtomicBoolean polling = new AtomicBoolean();
    boolean armed;
    boolean notified;
    boolean wakeRequested;
    boolean overrun;
    /** Closed by its user: unusable from now on. */
    boolean closed;
    /** Destroyed (ibv_destroy_cq succeeded); a close refused while queue pairs used it leaves it alive, leaked. */
    boolean destroyed;
    Throwable pollFailure;

    FakeCq(FakeFabric fabric, FakeDevice device, int capacity) {
        this.fabric = fabric;
        this.device = device;
        this.signal = fabric.lock.newCondition();
        this.capacity = capacity;
    }

    FakeFabric fabric() {
        return fabric;
    }

    @Override
    public int capacity() {
        return capacity;
    }

    @Override
    public int poll(Completions out) throws FabricException {
        if (!polling.compareAndSet(false, true)) {
            fabric.violation("concurrent poll of one completion queue");
        }
        fabric.lock.lock();
        try {
            if (closed) {
                fabric.violation("poll of a destroyed completion queue");
                throw new FabricException("ibv_poll_cq: completion queue destroyed");
            }
            if (overrun) {
                throw new FabricException("ibv_poll_cq: completion queue overrun (IBV_EVENT_CQ_ERR)");
            }
            Throwable failure = pollFailure;
            pollFailure = null;
            if (failure instanceof FabricException f) {
                throw f;
            } else if (failure instanceof RuntimeException r) {
                throw r;
            } else if (failure instanceof Error e) {
                throw e;
            }
            out.clear();
            if (fabric.completionsHeld(this)) {
                return 0; // a test holds them back (FakeFabric.holdCompletions)
            }
            while (out.count() < out.capacity() && !entries.isEmpty()) {
                Cqe e = entries.poll();
                out.add(e.wrId, e.status, e.opcode, e.length, e.qp.qpn, e.immediate);
                if (e.recv) {
                    e.qp.rqOccupied--;
                } else {
                    e.qp.sqOccupied -= e.sqFree;
                }
            }
            return out.count();
        } finally {
            fabric.lock.unlock();
            polling.set(false);
        }
    }

    @Override
    public void wakeUp() {
        fabric.lock.lock();
        try {
            wakeRequested = true;
            signal.signalAll();
        } finally {
            fabric.lock.unlock();
        }
    }

    @Override
    public void requestNotification() throws FabricException {
        fabric.lock.lock();
        try {
            if (closed) {
                throw new FabricException("ibv_req_notify_cq: completion queue destroyed");
            }
            armed = true;
        } finally {
            fabric.lock.unlock();
        }
    }

    @Override
    public boolean awaitNotification(long timeoutMillis) throws FabricException {
        fabric.lock.lock();
        try {
            long left = timeoutMillis < 0 ? Long.MAX_VALUE : TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
            // a poll failure set by the test ends the wait like an async error event would (on verbs the QPs of a
            // failed queue raise QP_FATAL, whose channel failures wake the loop): the loop then polls and sees it
            while (!notified && !closed && !overrun && !wakeRequested && pollFailure == null) {
                if (left <= 0) {
                    return false;
                }
                if (timeoutMillis < 0) {
                    signal.await();
                } else {
                    left = signal.awaitNanos(left);
                }
            }
            if (!notified && !closed && !overrun) {
                wakeRequested = false; // like the eventfd: one read clears every wake-up pending
                return false;
            }
            wakeRequested = false;
            if (closed) {
                throw new FabricException("ibv_get_cq_event: completion queue destroyed");
            }
            notified = false;
            return true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        } finally {
            fabric.lock.unlock();
        }
    }

    @Override
    public void close() {
        fabric.lock.lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            signal.signalAll();
            if (!users.isEmpty()) {
                // as IbvCompletionQueue.close: ibv_destroy_cq fails with EBUSY, the queue is closed for its user and
                // its native object leaks (it stays live; completions of its queue pairs are no longer polled)
                fabric.violation("completion queue destroyed while " + users.size() + " queue pairs still use it"
                        + " (ibv_destroy_cq: EBUSY; the queue leaks)");
                return;
            }
            destroyed = true;
            device.cqs.remove(this);
            fabric.liveCqs.decrementAndGet();
        } finally {
            fabric.lock.unlock();
        }
    }
}
