/*
 * Fakes a reliable-connected queue pair with its rdma_cm id (ibv_qp + rdma_cm_id), and its state ({@link QpState}).
 * Enforces: posting before the connection is established (or, accepted, before ESTABLISHED or the peer's first frame),
 * on a destroyed queue pair, more sges or inline bytes than its caps (EINVAL), more outstanding requests than its caps
 * (ENOMEM), SEND_WITH_IMM without device support, concurrent posts, receives posted on a queue pair of a shared
 * receive queue, destroying it established with work requests posted (and, when required, with receive completions
 * unpolled). State: guarded by the fabric's lock; its events are delivered on the fabric's cm thread.
 */
package dev.artemisrdma.transport;

import dev.artemisrdma.transport.FakeCq.Cqe;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.PartialPostException;
import dev.artemisrdma.transport.fabric.QueuePairCaps;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.fabric.SendList;
import dev.artemisrdma.transport.fabric.WcStatus;
import dev.artemisrdma.transport.inmemory.KeptSend;
import dev.artemisrdma.transport.inmemory.QueuePairBase;
import dev.artemisrdma.transport.inmemory.RecvRing;
import dev.artemisrdma.transport.inmemory.VerbsRules;

import java.net.InetSocketAddress;
import java.util.ArrayDeque;
import java.util.concurrent.atomic.AtomicBoolean;

final class FakeQp extends QueuePairBase<FakeDevice> {

    /** Where a queue pair is: created (INIT), connected (RTS), in error (flushing), destroyed. */
    enum QpState { INIT, RTS, ERROR, DESTROYED }

    private final FakeFabric fabric;
    final FakeCq cq;
    final QueuePairEvents events;
    final ArrayDeque<KeptSend> sq = new ArrayDeque<>();
    final RecvRing rq;
    final AtomicBoolean posting = new AtomicBoolean();
    QpState state = QpState.INIT;
    FakeSrq srq;
    FakeQp peer;
    int incomingRnrRetry = 7;
    int sqOccupied;
    int rqOccupied;
    int completedUnsignaled;
    boolean everEstablished;
    boolean disconnected;
    /**
     * A passive queue pair is RTS once accepted (as rdma_accept leaves it), but our verbs binding takes sends only
     * after rdma_cm's ESTABLISHED event or {@link #establishedByPeer}: until then a send is a violation.
     */
    volatile boolean awaitingEstablished;

    FakeQp(FakeFabric fabric, int qpn, QueuePairCaps caps, FakeCq cq, QueuePairEvents events,
           InetSocketAddress local, InetSocketAddress remote) {
        super(fabric.device, qpn, caps, local, remote);
        this.fabric = fabric;
        this.cq = cq;
        this.events = events;
        this.rq = new RecvRing(Math.max(1, caps.maxRecvWr()));
    }

    @Override
    public void establishedByPeer() {
        awaitingEstablished = false;
        fabric.establishedByPeer.incrementAndGet();
    }

    @Override
    public boolean isEstablished() {
        fabric.lock.lock();
        try {
            return state == QpState.RTS;
        } finally {
            fabric.lock.unlock();
        }
    }

    @Override
    public void postSend(SendList list) throws FabricException {
        if (!posting.compareAndSet(false, true)) {
            fabric.violation("concurrent post on qp " + qpn);
        }
        fabric.lock.lock();
        try {
            if (state == QpState.DESTROYED) {
                fabric.violation("postSend on destroyed qp " + qpn);
                throw new FabricException("ibv_post_send: queue pair destroyed");
            }
            if (state == QpState.INIT) {
                fabric.violation("postSend on qp " + qpn + " before the connection is established");
                throw new FabricException("ibv_post_send: queue pair not established");
            }
            if (awaitingEstablished) {
                fabric.violation("postSend on accepted qp " + qpn + " before ESTABLISHED or the peer's first frame");
                throw new FabricException("rdma_post_sendv: the connection is not established yet");
            }
            for (int i = 0; i < list.size(); i++) {
                refuse(VerbsRules.sendRefusal(list, i, caps, !fabric.noImmediateData, qpn));
            }
            refuse(VerbsRules.depthRefusal("ibv_post_send", qpn, list.size(), sqOccupied, caps.maxSendWr()));
            int partial = FakeFabric.takeInjected(fabric.partialSendPost, list.size());
            for (int i = 0; i < list.size(); i++) {
                if (i == partial) {
                    fabric.wireWork.signalAll();
                    throw new PartialPostException("ibv_post_send: work request " + i + " refused (injected "
                            + "ENOMEM " + FakeFabric.ENOMEM + ")", null, i);
                }
                KeptSend w = new KeptSend(list, i, fabric.memory);
                fabric.sendsBySges.incrementAndGet(Math.min(list.sgeCount(i), fabric.sendsBySges.length() - 1));
                if (w.inlineUnreadable()) {
                    fabric.violation("LOC_PROT_ERR: inline send on qp " + qpn + " reads unregistered memory");
                    throw new FabricException("ibv_post_send: inline sge not readable (EFAULT)");
                }
                sqOccupied++;
                if (state == QpState.ERROR) {
                    fabric.completeSend(this, w, WcStatus.WR_FLUSH_ERR, 0);
                } else {
                    sq.add(w);
                }
            }
            fabric.wireWork.signalAll();
        } finally {
            fabric.lock.unlock();
            posting.set(false);
        }
    }

    /** A verbs rule broken ({@link VerbsRules}): recorded, and the post fails as the provider fails it. */
    private void refuse(String refusal) throws FabricException {
        if (refusal != null) {
            fabric.violation(refusal);
            throw new FabricException(refusal);
        }
    }

    /** Where SENDs to this queue pair land: its own receive queue, or its shared one. */
    RecvRing receiveQueue() {
        return srq != null ? srq.rq : rq;
    }

    @Override
    public void postRecv(RecvList list) throws FabricException {
        if (srq != null) {
            fabric.violation("postRecv on qp " + qpn + ", which takes its receives from a shared receive queue");
            throw new FabricException("ibv_post_recv: queue pair uses a shared receive queue (EINVAL)");
        }
        if (!posting.compareAndSet(false, true)) {
            fabric.violation("concurrent post on qp " + qpn);
        }
        fabric.lock.lock();
        try {
            if (state == QpState.DESTROYED) {
                fabric.violation("postRecv on destroyed qp " + qpn);
                throw new FabricException("ibv_post_recv: queue pair destroyed");
            }
            refuse(VerbsRules.depthRefusal("ibv_post_recv", qpn, list.size(), rqOccupied, caps.maxRecvWr()));
            int partial = FakeFabric.takeInjected(fabric.partialRecvPost, list.size());
            for (int i = 0; i < list.size(); i++) {
                if (i == partial) {
                    fabric.wireWork.signalAll();
                    throw new PartialPostException("ibv_post_recv: work request " + i + " refused (injected "
                            + "ENOMEM " + FakeFabric.ENOMEM + ")", null, i);
                }
                rqOccupied++;
                if (state == QpState.ERROR) {
                    fabric.push(cq, new Cqe(this, list.wrId(i), WcStatus.WR_FLUSH_ERR, Completions.OPCODE_RECV, 0,
                            true, 0));
                } else {
                    rq.add(list, i);
                }
            }
            fabric.wireWork.signalAll();
        } finally {
            fabric.lock.unlock();
            posting.set(false);
        }
    }

    @Override
    public void disconnect() {
        fabric.lock.lock();
        try {
            if (disconnected || state == QpState.DESTROYED) {
                return;
            }
            disconnected = true;
            boolean wasConnected = state == QpState.RTS;
            fabric.toError(this);
            if (wasConnected) {
                fabric.cm.execute(() -> events.disconnected(this, "disconnected"));
            }
            FakeQp p = peer;
            if (p != null && p.state == QpState.RTS) {
                fabric.toError(p);
                fabric.cm.execute(() -> p.events.disconnected(p, "peer disconnected"));
            }
        } finally {
            fabric.lock.unlock();
        }
    }

    @Override
    public void close() {
        fabric.lock.lock();
        try {
            if (state == QpState.DESTROYED) {
                return;
            }
            if (everEstablished && (!sq.isEmpty() || !rq.isEmpty())) {
                fabric.violation("qp " + qpn + " destroyed with " + sq.size() + " sends and " + rq.size()
                        + " receives still posted");
            }
            if (fabric.receivesPolledBeforeDestroy) {
                long unpolled = cq.entries.stream().filter(e -> e.qp() == this && e.recv()).count();
                if (unpolled > 0) {
                    fabric.violation("qp " + qpn + " destroyed with " + unpolled
                            + " receive completions not yet polled");
                }
            }
            FakeQp p = peer;
            fabric.destroyLocked(this);
            if (fabric.holdIdDestroys) {
                fabric.held.add(this);
            }
            if (p != null && p.state == QpState.RTS) {
                fabric.toError(p);
                fabric.cm.execute(() -> p.events.disconnected(p, "peer destroyed its queue pair"));
            }
        } finally {
            fabric.lock.unlock();
        }
    }

    @Override
    public void whenGone(Runnable gone) {
        fabric.lock.lock();
        try {
            if (state != QpState.DESTROYED) {
                fabric.violation("whenGone asked of qp " + qpn + " before it was closed");
            }
            if (fabric.held.contains(this)) {
                fabric.heldIdDestroys.add(gone);
                return;
            }
        } finally {
            fabric.lock.unlock();
        }
        gone.run();
    }

    @Override
    public String toString() {
        return "FakeQp[" + qpn + " " + state + "]";
    }
}
