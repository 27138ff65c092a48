package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.fabric.CompletionQueue;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.ConnectOptions;
import dev.artemisrdma.transport.fabric.ConnectionRejectedException;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.DeviceListener;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.FabricListener;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairSpec;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.fabric.RegisteredMemory;
import dev.artemisrdma.transport.fabric.SendList;
import dev.artemisrdma.transport.fabric.SharedReceiveQueue;
import dev.artemisrdma.transport.fabric.WcStatus;

/** The fake must enforce the verbs rules, or the transport tests prove nothing. Raw SPI, no transport. */
class FakeFabricTest {

    private FakeFabric fabric;
    private CompletionQueue cqA;
    private CompletionQueue cqB;
    private RegisteredMemory memA;
    private RegisteredMemory memB;
    private QueuePair a;
    private QueuePair b;
    private final Completions wc = new Completions(64);

    /** Connects a (active) to b (passive) with the given RNR retry on b, no receives posted. */
    private void connect(int rnrRetryOnB, int maxSendWr, int maxInline) throws Exception {
        connect(rnrRetryOnB, maxSendWr, maxInline, 64);
    }

    private void connect(int rnrRetryOnB, int maxSendWr, int maxInline, int cqEntriesA) throws Exception {
        fabric = new FakeFabric(new FakeFabric.Limits(1024, 4, 4096, 128, false));
        cqA = fabric.device().createCompletionQueue(cqEntriesA);
        cqB = fabric.device().createCompletionQueue(64);
        memA = fabric.device().register(4096);
        memB = fabric.device().register(4096);
        CompletableFuture<QueuePair> passive = new CompletableFuture<>();
        FabricListener l = fabric.listen(Peers.serverAddress(), req -> {
            try {
                passive.complete(req.accept(setup(cqB, maxSendWr, maxInline), new byte[] {1}, rnrRetryOnB,
                        (qp, reason) -> { }));
            } catch (FabricException e) {
                passive.completeExceptionally(e);
            }
        });
        a = fabric.connect(l.localAddress(), setup(cqA, maxSendWr, maxInline),
                new ConnectOptions(new byte[] {2}, 7, 7, Duration.ofSeconds(5)), (qp, reason) -> { });
        b = passive.get(5, TimeUnit.SECONDS);
        l.close();
    }

    private static ConnectionSetup setup(CompletionQueue cq, int maxSendWr, int maxInline) {
        return new ConnectionSetup() {
            @Override
            public QueuePairSpec queuePairSpec(FabricDevice device) {
                return new QueuePairSpec(cq, maxSendWr, 8, 2, 1, maxInline);
            }

            @Override
            public void prepare(QueuePair queuePair) {
            }
        };
    }

    @AfterEach
    void close() {
        if (fabric != null) {
            fabric.close();
        }
    }

    private List<int[]> pollUntil(CompletionQueue cq, int n) throws Exception {
        List<int[]> got = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (got.size() < n && System.nanoTime() < deadline) {
            int k = cq.poll(wc);
            for (int i = 0; i < k; i++) {
                got.add(new int[] {(int) wc.wrId(i), wc.status(i), wc.byteLength(i)});
            }
            if (k == 0) {
                Thread.sleep(1);
            }
        }
        assertEquals(n, got.size(), "completions");
        return got;
    }

    private SendList send(long wrId, int length, int flags) {
        SendList s = new SendList(4, 8);
        s.addSend(wrId, flags).addSge(memA.address(), length, memA.lkey());
        return s;
    }

    private static boolean has(List<String> violations, String text) {
        Predicate<String> p = v -> v.contains(text);
        return violations.stream().anyMatch(p);
    }

    @Test
    void sendArrivesInAPostedReceive() throws Exception {
        connect(0, 8, 64);
        memA.buffer().put(0, (byte) 42);
        b.postRecv(new RecvList(1).add(7, memB.address(), 100, memB.lkey()));
        a.postSend(send(5, 100, SendList.FLAG_SIGNALED));
        assertEquals(List.of(7, 0, 100).toString(), toList(pollUntil(cqB, 1).get(0)));
        assertEquals(List.of(5, 0, 100).toString(), toList(pollUntil(cqA, 1).get(0)));
        assertEquals(42, memB.buffer().get(0));
        fabric.assertNoViolations();
    }

    private static String toList(int[] x) {
        return List.of(x[0], x[1], x[2]).toString();
    }

    @Test
    void sendWithoutReceiveIsAnRnrErrorWithRetryZeroAndLaterWorkFlushes() throws Exception {
        connect(0, 8, 64);
        a.postSend(send(1, 10, 0)); // unsignaled: the error completion comes anyway
        a.postSend(send(2, 10, SendList.FLAG_SIGNALED));
        List<int[]> got = pollUntil(cqA, 2);
        assertEquals(WcStatus.RNR_RETRY_EXC_ERR, got.get(0)[1]);
        assertEquals(WcStatus.WR_FLUSH_ERR, got.get(1)[1]);
        assertTrue(has(fabric.violations(), "RNR"), fabric.violations().toString());
        assertFalse(a.isEstablished());
        assertFalse(b.isEstablished(), "both queue pairs go to error");
    }

    @Test
    void sendWithoutReceiveWaitsWithRetrySeven() throws Exception {
        connect(7, 8, 64);
        a.postSend(send(1, 10, SendList.FLAG_SIGNALED));
        Thread.sleep(50);
        assertEquals(0, cqA.poll(wc), "still retrying");
        b.postRecv(new RecvList(1).add(9, memB.address(), 100, memB.lkey()));
        assertEquals(WcStatus.SUCCESS, pollUntil(cqA, 1).get(0)[1]);
        fabric.assertNoViolations();
    }

    @Test
    void sendLongerThanTheReceiveIsALengthError() throws Exception {
        connect(0, 8, 64);
        b.postRecv(new RecvList(1).add(9, memB.address(), 50, memB.lkey()));
        a.postSend(send(1, 100, SendList.FLAG_SIGNALED));
        assertEquals(WcStatus.LOC_LEN_ERR, pollUntil(cqB, 1).get(0)[1]);
        assertEquals(WcStatus.REM_INV_REQ_ERR, pollUntil(cqA, 1).get(0)[1]);
        assertTrue(has(fabric.violations(), "LOC_LEN_ERR"));
    }

    @Test
    void sgeOutsideRegisteredMemoryIsAProtectionError() throws Exception {
        connect(0, 8, 64);
        b.postRecv(new RecvList(1).add(9, memB.address(), 100, memB.lkey()));
        SendList s = new SendList(1, 2);
        s.addSend(1, SendList.FLAG_SIGNALED).addSge(memA.address() + 4090, 100, memA.lkey());
        a.postSend(s);
        assertEquals(WcStatus.LOC_PROT_ERR, pollUntil(cqA, 1).get(0)[1]);
        assertTrue(has(fabric.violations(), "LOC_PROT_ERR"));
        fabric.clearViolations();
        // wrong lkey
        connect(0, 8, 64);
        b.postRecv(new RecvList(1).add(9, memB.address(), 100, memB.lkey()));
        SendList t = new SendList(1, 2);
        t.addSend(1, SendList.FLAG_SIGNALED).addSge(memA.address(), 10, memB.lkey());
        a.postSend(t);
        assertEquals(WcStatus.LOC_PROT_ERR, pollUntil(cqA, 1).get(0)[1]);
    }

    @Test
    void postingRulesFailThePost() throws Exception {
        connect(7, 2, 64);
        SendList tooManySges = new SendList(1, 8);
        tooManySges.addSend(1, 0);
        for (int i = 0; i < 3; i++) {
            tooManySges.addSge(memA.address(), 1, memA.lkey());
        }
        FabricException e = assertThrows(FabricException.class, () -> a.postSend(tooManySges));
        assertTrue(e.getMessage().contains("EINVAL"));
        e = assertThrows(FabricException.class, () -> a.postSend(send(1, 100, SendList.FLAG_INLINE)));
        assertTrue(e.getMessage().contains("EINVAL"), "inline above max inline data");
        SendList three = new SendList(3, 3);
        for (int i = 0; i < 3; i++) {
            three.addSend(i, 0).addSge(memA.address(), 1, memA.lkey());
        }
        e = assertThrows(FabricException.class, () -> a.postSend(three));
        assertTrue(e.getMessage().contains("ENOMEM"), "more outstanding than max send WR");
        // unsignaled sends keep their slots until a later completion is polled
        b.postRecv(new RecvList(4).add(1, memB.address(), 100, memB.lkey()).add(2, memB.address(), 100, memB.lkey())
                .add(3, memB.address(), 100, memB.lkey()));
        a.postSend(send(10, 1, 0));
        a.postSend(send(11, 1, 0));
        pollUntil(cqB, 2);
        e = assertThrows(FabricException.class, () -> a.postSend(send(12, 1, SendList.FLAG_SIGNALED)));
        assertTrue(e.getMessage().contains("ENOMEM"), "unsignaled slots are not reclaimed without a completion");
        assertTrue(has(fabric.violations(), "sges") && has(fabric.violations(), "inline"));
    }

    @Test
    void sendBeforeEstablishedFails() throws Exception {
        fabric = new FakeFabric();
        CompletionQueue cq = fabric.device().createCompletionQueue(16);
        RegisteredMemory m = fabric.device().register(64);
        CompletableFuture<QueuePair> early = new CompletableFuture<>();
        QueuePair[] handedOver = new QueuePair[1];
        FabricListener l = fabric.listen(Peers.serverAddress(), req -> req.reject(null));
        ConnectionSetup s = new ConnectionSetup() {
            @Override
            public QueuePairSpec queuePairSpec(FabricDevice device) {
                return new QueuePairSpec(cq, 4, 4, 2, 1, 0);
            }

            @Override
            public void prepare(QueuePair qp) {
                handedOver[0] = qp;
                SendList list = new SendList(1, 1);
                list.addSend(1, 0).addSge(m.address(), 1, m.lkey());
                try {
                    qp.postSend(list);
                    early.complete(qp);
                } catch (FabricException e) {
                    early.completeExceptionally(e);
                }
            }
        };
        assertThrows(ConnectionRejectedException.class, () -> fabric.connect(l.localAddress(), s,
                new ConnectOptions(null, 0, 0, Duration.ofSeconds(2)), (qp, r) -> { }));
        assertTrue(early.isCompletedExceptionally());
        assertTrue(has(fabric.violations(), "before the connection is established"));
        assertEquals(1, fabric.liveQueuePairs(), "prepare handed the queue pair over: the fabric destroys it no more");
        handedOver[0].close();
        assertEquals(0, fabric.liveQueuePairs(), "its owner destroyed it");
    }

    @Test
    void completionQueueOverrunIsFatal() throws Exception {
        connect(7, 8, 0, 2); // a's queue holds 2 completions
        RecvList r = new RecvList(4);
        for (int i = 0; i < 3; i++) {
            r.add(i, memB.address(), 100, memB.lkey());
        }
        b.postRecv(r);
        for (int i = 0; i < 3; i++) {
            a.postSend(send(i, 1, SendList.FLAG_SIGNALED));
        }
        Peers.await("overrun", 5000, () -> has(fabric.violations(), "CQ overrun"));
        assertThrows(FabricException.class, () -> cqA.poll(wc));
    }

    @Test
    void disconnectFlushesEverythingAndTellsBothSides() throws Exception {
        fabric = new FakeFabric();
        cqA = fabric.device().createCompletionQueue(64);
        cqB = fabric.device().createCompletionQueue(64);
        memA = fabric.device().register(4096);
        CompletableFuture<String> bHeard = new CompletableFuture<>();
        CompletableFuture<QueuePair> passive = new CompletableFuture<>();
        FabricListener l = fabric.listen(Peers.serverAddress(), req -> {
            try {
                passive.complete(req.accept(setup(cqB, 8, 0), null, 7, (qp, reason) -> bHeard.complete(reason)));
            } catch (FabricException e) {
                passive.completeExceptionally(e);
            }
        });
        a = fabric.connect(l.localAddress(), setup(cqA, 8, 0), new ConnectOptions(null, 7, 7, Duration.ofSeconds(5)),
                (qp, reason) -> { });
        b = passive.get(5, TimeUnit.SECONDS);
        a.postRecv(new RecvList(2).add(1, memA.address(), 10, memA.lkey()).add(2, memA.address(), 10, memA.lkey()));
        a.postSend(send(3, 10, 0)); // waits for a receive on b (retry 7)
        a.disconnect();
        List<int[]> got = pollUntil(cqA, 3);
        for (int[] c : got) {
            assertEquals(WcStatus.WR_FLUSH_ERR, c[1]);
        }
        assertEquals("peer disconnected", bHeard.get(5, TimeUnit.SECONDS));
        // memory still pointed at by posted work is a violation; after the flush it is not
        memA.close();
        a.close();
        b.close();
        cqA.close();
        cqB.close();
        fabric.assertNoViolations();
        assertEquals(0, fabric.liveQueuePairs());
        assertEquals(0, fabric.liveCompletionQueues());
        assertEquals(0, fabric.liveMemoryRegions());
    }

    @Test
    void releasingMemoryUnderPostedWorkIsAViolation() throws Exception {
        connect(7, 8, 0);
        b.postRecv(new RecvList(1).add(1, memB.address(), 10, memB.lkey()));
        memB.close();
        assertTrue(has(fabric.violations(), "memory deregistered while receive"), fabric.violations().toString());
        cqB.close();
        assertTrue(has(fabric.violations(), "completion queue destroyed while"), fabric.violations().toString());
        b.close();
        assertTrue(has(fabric.violations(), "destroyed with"), fabric.violations().toString());
    }

    @Test
    void notificationOnlyForCompletionsAfterArming() throws Exception {
        connect(7, 8, 0);
        b.postRecv(new RecvList(2).add(1, memB.address(), 10, memB.lkey()).add(2, memB.address(), 10, memB.lkey()));
        a.postSend(send(1, 10, SendList.FLAG_SIGNALED));
        Peers.await("first completion queued", 5000, () -> {
            return false || probe();
        });
        cqB.requestNotification();
        assertFalse(cqB.awaitNotification(20), "a completion queued before arming raises no event");
        a.postSend(send(2, 10, SendList.FLAG_SIGNALED));
        assertTrue(cqB.awaitNotification(5000));
        assertEquals(2, pollUntil(cqB, 2).size());
    }

    private boolean probe() {
        // the sender's completion follows the receiver's: once it is there, b's completion is queued
        try {
            return cqA.poll(wc) > 0;
        } catch (FabricException e) {
            throw new AssertionError(e);
        }
    }

    // ------------------------------------------------------------------ native objects form a tree (issue 22, item 2)

    @Test
    void destroyingACompletionQueueAQueuePairStillUsesIsRefusedAndLeaksIt() throws Exception {
        connect(7, 8, 0);
        assertEquals(2, fabric.liveCompletionQueues());
        cqB.close(); // b still uses it: ibv_destroy_cq says EBUSY
        assertTrue(has(fabric.violations(), "completion queue destroyed while 1 queue pairs still use it"),
                fabric.violations().toString());
        assertThrows(FabricException.class, () -> cqB.poll(wc), "closed for its user");
        b.close();
        cqB.close(); // a second close does not retry the destroy, as IbvCompletionQueue's does not
        assertEquals(2, fabric.liveCompletionQueues(), "the refused queue stays live, leaked");
        a.close();
        cqA.close(); // nothing uses it any more: destroyed
        assertEquals(1, fabric.liveCompletionQueues());
    }

    @Test
    void destroyingASharedReceiveQueueAQueuePairIsAttachedToIsRefused() throws Exception {
        fabric = new FakeFabric(new FakeFabric.Limits(1024, 4, 4096, 128, false));
        cqA = fabric.device().createCompletionQueue(64);
        cqB = fabric.device().createCompletionQueue(64);
        memB = fabric.device().register(4096);
        SharedReceiveQueue srq = fabric.device().createSharedReceiveQueue(8);
        srq.postRecv(new RecvList(1).add(1, memB.address(), 100, memB.lkey()));
        CompletableFuture<QueuePair> passive = new CompletableFuture<>();
        FabricListener l = fabric.listen(Peers.serverAddress(), req -> {
            try {
                passive.complete(req.accept(onSrq(cqB, srq), new byte[] {1}, 7, (qp, reason) -> { }));
            } catch (FabricException e) {
                passive.completeExceptionally(e);
            }
        });
        a = fabric.connect(l.localAddress(), setup(cqA, 8, 0),
                new ConnectOptions(new byte[] {2}, 7, 7, Duration.ofSeconds(5)), (qp, reason) -> { });
        b = passive.get(5, TimeUnit.SECONDS);
        l.close();

        IllegalStateException refused = assertThrows(IllegalStateException.class, srq::close,
                "ibv_destroy_srq says EBUSY and our binding throws");
        assertTrue(refused.getMessage().contains("still in use"), refused.getMessage());
        assertTrue(has(fabric.violations(), "shared receive queue destroyed while 1 queue pairs use it"),
                fabric.violations().toString());
        assertEquals(1, fabric.liveSharedReceiveQueues(), "the queue stays alive");
        srq.postRecv(new RecvList(1).add(2, memB.address(), 100, memB.lkey())); // and usable
        a.close();
        b.close();
        srq.close(); // no queue pair left: destroyed
        assertEquals(0, fabric.liveSharedReceiveQueues());
    }

    private static ConnectionSetup onSrq(CompletionQueue cq, SharedReceiveQueue srq) {
        return new ConnectionSetup() {
            @Override
            public QueuePairSpec queuePairSpec(FabricDevice device) {
                return new QueuePairSpec(cq, 8, 8, 2, 1, 0, srq);
            }

            @Override
            public void prepare(QueuePair queuePair) {
            }
        };
    }

    @Test
    void freeingADeviceWithLiveChildrenIsRefused() throws Exception {
        fabric = new FakeFabric();
        FabricDevice device = fabric.device();
        CompletionQueue cq = device.createCompletionQueue(4);
        RegisteredMemory memory = device.register(4096);
        CompletableFuture<FabricDevice> lost = new CompletableFuture<>();
        DeviceListener holder = (d, reason) -> lost.complete(d);
        fabric.addDeviceListener(holder);
        fabric.removeDevice();
        assertEquals(device, lost.get(5, TimeUnit.SECONDS));
        fabric.releaseDevice(device, holder); // wrong order: its queue and memory are still there
        assertTrue(has(fabric.violations(), "freed while it still holds 1 completion queue, 1 memory region"),
                fabric.violations().toString());
        assertFalse(fabric.releasedDevices().contains(device), "ibv_dealloc_pd says EBUSY: the device is not freed");

        fabric.clearViolations();
        fabric.restoreDevice();
        CompletableFuture<FabricDevice> lostAgain = new CompletableFuture<>();
        DeviceListener tidy = (d, reason) -> lostAgain.complete(d);
        fabric.addDeviceListener(tidy);
        FabricDevice second = fabric.device();
        RegisteredMemory onSecond = second.register(4096);
        fabric.removeDevice();
        assertEquals(second, lostAgain.get(5, TimeUnit.SECONDS));
        onSecond.close(); // the right order: children first
        fabric.releaseDevice(second, tidy);
        fabric.releaseDevice(second, holder);
        assertTrue(fabric.releasedDevices().contains(second));
        fabric.assertNoViolations();

        cq.close();
        memory.close();
    }

    @Test
    void closingTheFabricWhileADeviceHoldsObjectsIsAViolation() throws Exception {
        fabric = new FakeFabric();
        RegisteredMemory memory = fabric.device().register(4096);
        fabric.close();
        assertTrue(has(fabric.violations(), "fabric closed while device fake0 (generation 0) still holds 1 memory"
                + " region"), fabric.violations().toString());
        memory.close();
    }

    @Test
    void deregisteringMemoryAReceiveLandedInBeforeItsCompletionIsPolledIsAViolation() throws Exception {
        connect(7, 8, 0);
        b.postRecv(new RecvList(1).add(1, memB.address(), 10, memB.lkey()));
        a.postSend(send(1, 10, SendList.FLAG_SIGNALED));
        Peers.await("the SEND executed", 5000, this::probe); // b's receive completion is queued before a's
        fabric.assertNoViolations();
        memB.close(); // nothing is posted any more, but the poller of cqB has yet to read what landed
        assertTrue(has(fabric.violations(), "has landed in it and its completion is not yet polled"),
                fabric.violations().toString());
    }
}
