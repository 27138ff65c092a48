/*
 * Fakes a registered memory region (ibv_mr): a direct buffer at a synthetic address with its own lkey. Enforces:
 * deregistering memory that a posted work request (send, receive, or a shared receive queue's receive) points into,
 * or that a receive landed in whose completion still waits unpolled in a live completion queue (the transport reads
 * the data when it polls: with the real binding the pages are unmapped by then).
 * State: {@code closed} and the fabric's registry of regions are guarded by the fabric's lock; the buffer's bytes
 * are written by the wire thread under that lock and read by the transport after it polled the completion.
 */
package dev.artemisrdma.transport;

import dev.artemisrdma.transport.inmemory.KeptSend;
import dev.artemisrdma.transport.inmemory.Region;
import dev.artemisrdma.transport.inmemory.Registry;

final class FakeMr extends Region {
    private final FakeFabric fabric;
    final FakeDevice device;
    boolean closed;

    FakeMr(FakeFabric fabric, FakeDevice device, Registry.Slot slot) {
        super(slot);
        this.fabric = fabric;
        this.device = device;
    }

    @Override
    public void close() {
        fabric.lock.lock();
        try {
            if (closed) {
                return;
            }
            for (FakeQp qp : fabric.qps) {
                for (KeptSend w : qp.sq) {
                    if (w.readsFrom(lkey())) {
                        fabric.violation("memory deregistered while SEND 0x" + Long.toHexString(w.wrId)
                                + " on qp " + qp.qpn + " still points into it");
                    }
                }
                for (int k = 0; k < qp.rq.size(); k++) {
                    if (qp.rq.lkeyAt(k) == lkey()) {
                        fabric.violation("memory deregistered while receive 0x" + Long.toHexString(qp.rq.wrIdAt(k))
                                + " on qp " + qp.qpn + " still points into it");
                    }
                }
            }
            for (FakeSrq srq : fabric.srqs) {
                for (int k = 0; k < srq.rq.size(); k++) {
                    if (srq.rq.lkeyAt(k) == lkey()) {
                        fabric.violation("memory deregistered while receives of a live shared receive queue point "
                                + "into it");
                        break;
                    }
                }
            }
            for (FakeCq cq : device.cqs) {
                if (cq.closed) {
                    continue; // a queue nobody polls any more
                }
                for (FakeCq.Cqe e : cq.entries) {
                    if (e.landedLkey() == lkey() && e.qp().state != FakeQp.QpState.DESTROYED) {
                        fabric.violation("memory deregistered while receive 0x" + Long.toHexString(e.wrId())
                                + " on qp " + e.qp().qpn + " has landed in it and its completion is not yet polled"
                                + " (the poller would read freed memory)");
                    }
                }
            }
            closed = true;
            device.mrs.remove(this);
            fabric.memory.remove(this);
            fabric.liveMrs.decrementAndGet();
            fabric.deregistrations.add(new FakeFabric.Deregistration(length(), Thread.currentThread().getName()));
        } finally {
            fabric.lock.unlock();
        }
    }
}
