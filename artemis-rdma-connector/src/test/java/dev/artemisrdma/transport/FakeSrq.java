/*
 * Fakes a shared receive queue (ibv_srq). Enforces: posting more receives than its capacity (ENOMEM), posting on or
 * creating a queue pair on a destroyed SRQ, concurrent posts, destroying it while queue pairs still use it (refused
 * as ibv_destroy_srq refuses it with EBUSY: the close throws IllegalStateException as our binding's does, and the
 * queue stays alive with its receives); raises the one-shot limit event and IBV_EVENT_SRQ_ERR. State: its receive queue, limit and closed flag are guarded by the
 * fabric's lock (the wire thread consumes receives under it); {@code users} is written under that lock too.
 */
package dev.artemisrdma.transport;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.fabric.SharedReceiveQueue;
import dev.artemisrdma.transport.inmemory.RecvRing;
import dev.artemisrdma.transport.inmemory.VerbsRules;

final class FakeSrq implements SharedReceiveQueue {
    private final FakeFabric fabric;
    final FakeDevice device;
    final int capacity;
    final RecvRing rq;
    final Set<FakeQp> users = ConcurrentHashMap.newKeySet();
    final AtomicBoolean posting = new AtomicBoolean();
    /** ibv_post_srq_recv calls that posted (each one list). */
    final java.util.concurrent.atomic.AtomicLong postCalls = new java.util.concurrent.atomic.AtomicLong();
    int limit;
    boolean closed;
    private final FailureNotice failure = new FailureNotice();

    FakeSrq(FakeFabric fabric, FakeDevice device, int capacity) {
        this.fabric = fabric;
        this.device = device;
        this.capacity = capacity;
        this.rq = new RecvRing(capacity);
    }

    @Override
    public int capacity() {
        return capacity;
    }

    @Override
    public void onFailure(java.util.function.Consumer<String> listener) {
        failure.listen(listener);
    }

    /** IBV_EVENT_SRQ_ERR on this queue, unless it is destroyed already. */
    boolean fail(String reason) {
        return !closed && failure.fail(reason);
    }

    /** A SEND took one (under the fabric lock). */
    void consumed() {
        int left = rq.size();
        if (left < fabric.srqLowWater) {
            fabric.srqLowWater = left;
        }
        if (limit > 0 && left < limit) {
            limit = 0; // one-shot, as IBV_EVENT_SRQ_LIMIT_REACHED
            fabric.srqLimitEvents.incrementAndGet();
        }
    }

    @Override
    public void postRecv(RecvList list) throws FabricException {
        if (!posting.compareAndSet(false, true)) {
            fabric.violation("concurrent post on a shared receive queue");
        }
        fabric.lock.lock();
        try {
            if (closed) {
                fabric.violation("postRecv on a destroyed shared receive queue");
                throw new FabricException("ibv_post_srq_recv: shared receive queue destroyed");
            }
            String refused = VerbsRules.depthRefusal("ibv_post_srq_recv", -1, list.size(), rq.size(), capacity);
            if (refused != null) {
                fabric.violation(refused);
                throw new FabricException(refused);
            }
            for (int i = 0; i < list.size(); i++) {
                rq.add(list, i);
            }
            postCalls.incrementAndGet();
            fabric.wireWork.signalAll();
        } finally {
            fabric.lock.unlock();
            posting.set(false);
        }
    }

    @Override
    public void armLimit(int limit) throws FabricException {
        fabric.lock.lock();
        try {
            if (limit < 0 || limit > capacity) {
                throw new FabricException("ibv_modify_srq: limit " + limit + " (EINVAL)");
            }
            this.limit = limit;
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
            if (!users.isEmpty()) {
                // as VerbsDevice.Srq.close: ibv_destroy_srq fails with EBUSY, the queue stays alive with its receives
                // posted, and the close throws
                fabric.violation("shared receive queue destroyed while " + users.size() + " queue pairs use it"
                        + " (ibv_destroy_srq: EBUSY)");
                throw new IllegalStateException("ibv_destroy_srq failed on " + device.name()
                        + ": the shared receive queue is still in use");
            }
            closed = true;
            rq.clear();
            device.srqs.remove(this);
            fabric.srqs.remove(this);
            fabric.liveSrqs.decrementAndGet();
        } finally {
            fabric.lock.unlock();
        }
    }
}
