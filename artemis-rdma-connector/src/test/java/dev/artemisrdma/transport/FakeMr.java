/*
 * Fakes a registered memory region (ibv_mr): a direct buffer at a synthetic address with its own lkey. Enforces:
 * deregistering memory that a posted work request (send, receive, or a shared receive queue's receive) points into,
 * or that a receive landed in whose completion still waits unpolled in a live completion queue (the transport reads
 * the data when it polls: with the real binding the pages are unmapped by then).
 * State: {@code closed} and the fabric's registry of regions are guarded by the fabric's lock; the buffer's bytes
 * are written by the wire thread under that lock and read by the transport after it polled the completion.
 */
package dev.artemisrdma.transport;

import java.nio.ByteBuffer;

import dev.artemisrdma.transport.fabric.RegisteredMemory;

final class FakeMr implements RegisteredMemory {
    private final FakeFabric fabric;
    final FakeDevice device;
    final long address;
    final int length;
    final int lkey;
    final ByteBuffer buffer;
    boolean closed;

    FakeMr(FakeFabric fabric, FakeDevice device, long address, int length, int lkey) {
        this.fabric = fabric;
        this.device = device;
        this.address = address;
        this.length = length;
        this.lkey = lkey;
        this.buffer = ByteBuffer.allocateDirect(length);
    }

    @Override
    public ByteBuffer buffer() {
        return buffer.duplicate().clear();
    }

    @Override
    public long address() {
        return address;
    }

    @Override
    public int lkey() {
        return lkey;
    }

    @Override
    public int length() {
        return length;
    }

    @Override
    public void close() {
        fabric.lock.lock();
        try {
            if (closed) {
                return;
            }
            for (FakeQp qp : fabric.qps) {
                for (SendWr w : qp.sq) {
                    if (w.inlineData == null) {
                        for (int s = 0; s < w.sgeLkey.length; s++) {
                            if (w.sgeLkey[s] == lkey) {
                                fabric.violation("memory deregistered while SEND 0x" + Long.toHexString(w.wrId)
                                        + " on qp " + qp.qpn + " still points into it");
                            }
                        }
                    }
                }
                for (RecvWr r : qp.rq) {
                    if (r.lkey() == lkey) {
                        fabric.violation("memory deregistered while receive 0x" + Long.toHexString(r.wrId())
                                + " on qp " + qp.qpn + " still points into it");
                    }
                }
            }
            for (FakeSrq srq : fabric.srqs) {
                if (srq.rq.stream().anyMatch(r -> r.lkey() == lkey)) {
                    fabric.violation("memory deregistered while receives of a live shared receive queue point into it");
                }
            }
            for (FakeCq cq : device.cqs) {
                if (cq.closed) {
                    continue; // a queue nobody polls any more
                }
                for (FakeCq.Cqe e : cq.entries) {
                    if (e.landed() != null && e.landed().lkey() == lkey && e.qp().state != FakeQp.QpState.DESTROYED) {
                        fabric.violation("memory deregistered while receive 0x" + Long.toHexString(e.wrId())
                                + " on qp " + e.qp().qpn + " has landed in it and its completion is not yet polled"
                                + " (the poller would read freed memory)");
                    }
                }
            }
            closed = true;
            device.mrs.remove(this);
            fabric.mrs.remove(lkey);
            fabric.liveMrs.decrementAndGet();
            fabric.deregistrations.add(new FakeFabric.Deregistration(length, Thread.currentThread().getName()));
        } finally {
            fabric.lock.unlock();
        }
    }
}
