package dev.artemisrdma.it;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.fabric.CompletionQueue;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.fabric.QueuePairSpec;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.fabric.RegisteredMemory;

/**
 * One side of a bare-verbs connection for the lab tests: a completion queue, a registered slab and a queue pair,
 * with helpers to post receives into fixed slots and to collect completions. No transport protocol involved.
 */
final class RawEndpoint implements ConnectionSetup, QueuePairEvents, AutoCloseable {

    static final int SLOT = 4096;

    private final int receives;
    private final int maxSendSge;
    private final int maxInline;
    private final int cqEntries;
    private CompletionQueue cq;
    private RegisteredMemory memory;
    private QueuePair qp;
    final CountDownLatch established = new CountDownLatch(1);
    final CountDownLatch disconnected = new CountDownLatch(1);
    volatile Throwable prepareFailure;
    volatile boolean tryEarlySend;

    RawEndpoint(int receives, int maxSendSge, int maxInline) {
        this(receives, maxSendSge, maxInline, 1024);
    }

    /** With a completion queue of {@code cqEntries} (at least; the device may round up). */
    RawEndpoint(int receives, int maxSendSge, int maxInline, int cqEntries) {
        this.receives = receives;
        this.maxSendSge = maxSendSge;
        this.maxInline = maxInline;
        this.cqEntries = cqEntries;
    }

    @Override
    public QueuePairSpec queuePairSpec(FabricDevice device) throws FabricException {
        cq = device.createCompletionQueue(cqEntries);
        memory = device.register(1 << 20);
        int sge = maxSendSge <= 0 ? device.limits().maxSge() : maxSendSge;
        return new QueuePairSpec(cq, 128, Math.max(1, receives), sge, 1, maxInline);
    }

    @Override
    public void prepare(QueuePair queuePair) throws FabricException {
        this.qp = queuePair;
        if (tryEarlySend) {
            try {
                dev.artemisrdma.transport.fabric.SendList list = new dev.artemisrdma.transport.fabric.SendList(1, 1);
                list.addSend(1, dev.artemisrdma.transport.fabric.SendList.FLAG_SIGNALED).addSge(memory.address(), 8,
                        memory.lkey());
                queuePair.postSend(list);
            } catch (FabricException e) {
                prepareFailure = e;
            }
        }
        if (receives > 0) {
            RecvList list = new RecvList(receives);
            for (int i = 0; i < receives; i++) {
                list.add(i, recvSlotAddress(i), SLOT, memory.lkey());
            }
            queuePair.postRecv(list);
        }
    }

    /** Receive slots live in the upper half of the slab; the lower half is for data to send. */
    long recvSlotAddress(int slot) {
        return memory.address() + memory.length() / 2 + (long) slot * SLOT;
    }

    java.nio.ByteBuffer recvSlot(int slot, int length) {
        java.nio.ByteBuffer b = memory.buffer();
        int start = memory.length() / 2 + slot * SLOT;
        b.position(start).limit(start + length);
        return b.slice();
    }

    @Override
    public void established(QueuePair queuePair) {
        established.countDown();
    }

    @Override
    public void disconnected(QueuePair queuePair, String reason) {
        disconnected.countDown();
    }

    QueuePair qp() {
        return qp;
    }

    CompletionQueue cq() {
        return cq;
    }

    RegisteredMemory memory() {
        return memory;
    }

    /** Polls until {@code n} completions arrived or the timeout passed; returns them in arrival order. */
    List<long[]> awaitCompletions(int n, long timeoutMillis) throws FabricException {
        List<long[]> got = new ArrayList<>();
        Completions batch = new Completions(32);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        while (got.size() < n && System.nanoTime() < deadline) {
            int k = cq.poll(batch);
            for (int i = 0; i < k; i++) {
                got.add(new long[] {batch.wrId(i), batch.status(i), batch.opcode(i), batch.byteLength(i)});
            }
            if (k == 0) {
                Thread.onSpinWait();
            }
        }
        return got;
    }

    @Override
    public void close() {
        if (qp != null) {
            qp.disconnect();
            qp.close();
        }
        if (cq != null) {
            cq.close();
        }
        if (memory != null) {
            memory.close();
        }
    }
}
