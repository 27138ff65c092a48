package dev.artemisrdma.it;

import dev.artemisrdma.transport.RawPeer;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.ConnectOptions;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.FabricListener;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.SendList;
import dev.artemisrdma.transport.fabric.WcStatus;
import dev.artemisrdma.transport.verbs.VerbsFabric;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The verbs binding on the real rxe fabric, with the real librdmacm and libibverbs. */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class VerbsLabTest {

    private static final ConnectOptions CONNECT = new ConnectOptions(new byte[] {1, 2, 3}, 7, 7,
            Duration.ofSeconds(20));

    /** A connected pair: the server accepts on rxe1's address, the client connects from the other device. */
    private static final class Pair implements AutoCloseable {
        final VerbsFabric fabric;
        final FabricListener listener;
        final RawPeer server;
        final RawPeer client;

        Pair(VerbsFabric fabric, RawPeer server, RawPeer client, int serverRnrRetry) throws Exception {
            this.fabric = fabric;
            this.server = server;
            this.client = client;
            CompletableFuture<QueuePair> accepted = new CompletableFuture<>();
            listener = fabric.listen(Lab.address(Lab.addr1(), Lab.freshPort()), request -> {
                try {
                    accepted.complete(request.accept(server, new byte[] {9, 8}, serverRnrRetry, server));
                } catch (FabricException e) {
                    accepted.completeExceptionally(e);
                }
            });
            QueuePair clientQp = fabric.connect(listener.localAddress(), client, CONNECT, client);
            assertTrue(clientQp.isEstablished());
            // IB/RoCE CM pads private data to its maximum (196 bytes in a REP, 56 in a REQ) with zeros
            byte[] reply = clientQp.peerPrivateData();
            assertTrue(reply.length >= 2 && reply[0] == 9 && reply[1] == 8, "the accept's private data reaches "
                    + "the client");
            QueuePair serverQp = accepted.get(20, TimeUnit.SECONDS);
            assertTrue(server.established.await(20, TimeUnit.SECONDS), "server side saw ESTABLISHED");
            assertTrue(serverQp.isEstablished());
            byte[] request = serverQp.peerPrivateData();
            assertTrue(request.length >= 3 && request[0] == 1 && request[1] == 2 && request[2] == 3,
                    "the connect's private data reaches the server");
        }

        @Override
        public void close() {
            client.close();
            server.close();
            listener.close();
        }
    }

    @Test
    void sendsWithOneTwoAndMaxSgeEntriesInlineAndNotCarryTheirContext() throws Exception {
        try (VerbsFabric fabric = new VerbsFabric();
             Pair pair = new Pair(fabric, new RawPeer(64, 1, 0), new RawPeer(0, 0, 256), 0)) {
            QueuePair qp = pair.client.qp();
            int maxSge = qp.caps().maxSendSge();
            int maxInline = qp.caps().maxInlineData();
            assertTrue(maxSge >= 2, "device offers scatter-gather: " + qp.caps());
            ByteBuffer data = pair.client.memory().buffer();
            for (int i = 0; i < 256 * 1024; i++) {
                data.put(i, (byte) (i * 31 + 7));
            }
            int[] sgeCounts = {1, 2, maxSge};
            int[] sizes = {16, Math.max(1, maxInline), 3000};
            SendList list = new SendList(32, 32 * maxSge);
            int slot = 0;
            for (int sgeCount : sgeCounts) {
                for (int size : sizes) {
                    for (boolean inline : new boolean[] {false, true}) {
                        if (inline && size > maxInline || size < sgeCount) {
                            continue;
                        }
                        list.clear();
                        long wrId = 0x5EED_0000L + slot;
                        list.addSend(wrId, SendList.FLAG_SIGNALED | (inline ? SendList.FLAG_INLINE : 0));
                        // pieces from scattered places of the slab, so the receiver sees their concatenation
                        int piece = size / sgeCount;
                        byte[] expected = new byte[size];
                        int filled = 0;
                        for (int s = 0; s < sgeCount; s++) {
                            int len = s == sgeCount - 1 ? size - filled : piece;
                            int offset = 8192 * s + 13 * slot;
                            list.addSge(pair.client.memory().address() + offset, len, pair.client.memory().lkey());
                            for (int b = 0; b < len; b++) {
                                expected[filled + b] = data.get(offset + b);
                            }
                            filled += len;
                        }
                        qp.postSend(list);
                        List<long[]> sent = pair.client.awaitCompletions(1, 10_000);
                        assertEquals(1, sent.size(), "send completion for " + sgeCount + " sges, " + size + " B");
                        assertEquals(wrId, sent.get(0)[0], "send completion carries the posted wr_id");
                        assertEquals(WcStatus.SUCCESS, (int) sent.get(0)[1], WcStatus.name((int) sent.get(0)[1]));
                        List<long[]> received = pair.server.awaitCompletions(1, 10_000);
                        assertEquals(1, received.size(), "receive completion");
                        assertEquals(slot, received.get(0)[0], "receives complete in posting order");
                        assertEquals(size, received.get(0)[3], "byte_len");
                        ByteBuffer got = pair.server.recvSlot(slot, size);
                        byte[] actual = new byte[size];
                        got.get(actual);
                        assertEquals(ByteBuffer.wrap(expected), ByteBuffer.wrap(actual),
                                sgeCount + " sges, " + size + " B, inline " + inline);
                        slot++;
                    }
                }
            }
            assertTrue(slot >= 8, "exercised " + slot + " combinations");
        }
    }

    @Test
    void listsOfWorkRequestsPostInOneCallAndCompleteInOrder() throws Exception {
        try (VerbsFabric fabric = new VerbsFabric();
             Pair pair = new Pair(fabric, new RawPeer(64, 1, 0), new RawPeer(0, 2, 0), 0)) {
            SendList list = new SendList(32, 64);
            for (int i = 0; i < 32; i++) {
                // selective signalling: only every 8th send asks for a completion
                list.addSend(100 + i, i % 8 == 7 ? SendList.FLAG_SIGNALED : 0)
                        .addSge(pair.client.memory().address() + i, 100, pair.client.memory().lkey());
            }
            pair.client.qp().postSend(list);
            List<long[]> sent = pair.client.awaitCompletions(4, 10_000);
            assertEquals(4, sent.size());
            for (int k = 0; k < 4; k++) {
                assertEquals(100 + 8 * k + 7, sent.get(k)[0]);
            }
            List<long[]> received = pair.server.awaitCompletions(32, 10_000);
            assertEquals(32, received.size());
            for (int i = 0; i < 32; i++) {
                assertEquals(i, received.get(i)[0]);
            }
        }
    }

    @Test
    void sendIntoNoPostedReceiveFailsWithRnrWhenThePeerAcceptedWithRnrRetryZero() throws Exception {
        try (VerbsFabric fabric = new VerbsFabric();
             Pair pair = new Pair(fabric, new RawPeer(0, 1, 0), new RawPeer(0, 1, 0), 0)) {
            SendList list = new SendList(1, 1);
            list.addSend(77, SendList.FLAG_SIGNALED).addSge(pair.client.memory().address(), 64,
                    pair.client.memory().lkey());
            pair.client.qp().postSend(list);
            List<long[]> sent = pair.client.awaitCompletions(1, 20_000);
            assertEquals(1, sent.size());
            assertEquals(77, sent.get(0)[0], "the failed completion still carries its wr_id");
            assertEquals("IBV_WC_RNR_RETRY_EXC_ERR", WcStatus.name((int) sent.get(0)[1]));
            // the queue pair is in error now: the next send is flushed
            list.clear();
            list.addSend(78, SendList.FLAG_SIGNALED).addSge(pair.client.memory().address(), 64,
                    pair.client.memory().lkey());
            pair.client.qp().postSend(list);
            List<long[]> flushed = pair.client.awaitCompletions(1, 20_000);
            assertEquals(1, flushed.size());
            assertEquals("IBV_WC_WR_FLUSH_ERR", WcStatus.name((int) flushed.get(0)[1]));
        }
    }

    /**
     * A completion queue that overruns: rxe drops the completion and raises IBV_EVENT_CQ_ERR, which the fabric turns
     * into a failure of that queue, so its poller (a completion loop) stops trusting it at once instead of waiting
     * for completions that were dropped. The transport sizes its queues so that this cannot happen; this is the
     * safety net, on the real device.
     */
    @Test
    void anOverrunCompletionQueueFailsItsNextPollNamingTheEvent() throws Exception {
        RdmaResources before = RdmaResources.afterWarmUp();
        try (VerbsFabric fabric = new VerbsFabric();
             Pair pair = new Pair(fabric, new RawPeer(64, 1, 0), new RawPeer(0, 1, 0, 4), 7)) {
            int capacity = pair.client.cq().capacity();
            int sends = capacity + 8;
            assertTrue(sends <= 64, "the device gave a queue of " + capacity + " entries for 4 asked");
            SendList list = new SendList(sends, sends);
            for (int i = 0; i < sends; i++) {
                list.addSend(i, SendList.FLAG_SIGNALED).addSge(pair.client.memory().address() + i, 64,
                        pair.client.memory().lkey());
            }
            pair.client.qp().postSend(list); // nothing polls the client's queue meanwhile: it overruns
            assertEquals(sends, pair.server.awaitCompletions(sends, 20_000).size(), "the peer received every send");
            Thread.sleep(1000); // the acknowledgements reach the client's completer meanwhile: a poll now would make room
            Completions batch = new Completions(64);
            FabricException failure = null;
            int polled = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (failure == null && System.nanoTime() < deadline) {
                try {
                    polled += pair.client.cq().poll(batch);
                } catch (FabricException e) {
                    failure = e;
                }
            }
            assertNotNull(failure, "no poll failed within 10 s after " + polled + " completions of " + sends);
            assertTrue(failure.getMessage().contains("IBV_EVENT_CQ_ERR on rxe")
                    && failure.getMessage().contains("overran"), failure.getMessage());
            assertTrue(polled <= capacity, polled + " completions polled from a queue of " + capacity);
            System.out.println("VerbsLabTest: a queue of " + capacity + " entries overrun by " + sends
                    + " signaled sends: " + polled + " completions polled, then: " + failure.getMessage());
        }
        // the failed queue, its queue pair and their memory are destroyed like any others
        assertEquals(before, RdmaResources.awaitEqual(before, 20_000), "rdma resource show counts return to where "
                + "they started");
    }

    @Test
    void postingBeforeTheConnectionIsEstablishedFailsInJava() throws Exception {
        RawPeer server = new RawPeer(8, 1, 0);
        server.tryEarlySend = true;
        try (VerbsFabric fabric = new VerbsFabric();
             Pair pair = new Pair(fabric, server, new RawPeer(8, 1, 0), 7)) {
            assertNotNull(server.prepareFailure, "a send before ESTABLISHED must be refused");
            assertTrue(server.prepareFailure.getMessage().contains("not established"),
                    server.prepareFailure.getMessage());
            assertTrue(pair.server.qp().isEstablished());
        }
    }

    /**
     * What the transport does when a peer's first frame beats rdma_cm's ESTABLISHED event: rdma_notify
     * (IBV_EVENT_COMM_EST) on the accepted id. Called when rdma_cm has established it already, it is answered
     * EISCONN or EINVAL, which is no error: the connection goes on and takes sends.
     */
    @Test
    void aQueuePairToldThePeerEstablishedItAfterRdmaCmDidGoesOn() throws Exception {
        try (VerbsFabric fabric = new VerbsFabric();
             Pair pair = new Pair(fabric, new RawPeer(8, 1, 0), new RawPeer(8, 1, 0), 7)) {
            pair.server.qp().establishedByPeer();
            assertTrue(pair.server.qp().isEstablished());
            SendList list = new SendList(1, 1);
            list.addSend(5, SendList.FLAG_SIGNALED)
                    .addSge(pair.server.memory().address(), 64, pair.server.memory().lkey());
            pair.server.qp().postSend(list);
            List<long[]> sent = pair.server.awaitCompletions(1, 10_000);
            assertEquals(1, sent.size(), "the send completed");
            assertEquals(0, sent.get(0)[1], "IBV_WC_SUCCESS");
            List<long[]> received = pair.client.awaitCompletions(1, 10_000);
            assertEquals(1, received.size(), "the client received it");
            assertEquals(0, received.get(0)[1], "IBV_WC_SUCCESS");
        }
    }

    @Test
    void connectingToAnAddressWithNoListenerFailsClearlyAndLeaksNothing() throws Exception {
        RdmaResources before = RdmaResources.afterWarmUp();
        try (VerbsFabric fabric = new VerbsFabric()) {
            long start = System.nanoTime();
            RawPeer client = new RawPeer(4, 1, 0);
            FabricException e = assertThrows(FabricException.class, () -> fabric.connect(
                    Lab.address(Lab.addr1(), Lab.freshPort()), client,
                    new ConnectOptions(new byte[0], 7, 7, Duration.ofSeconds(15)), client));
            long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertTrue(millis < 15_000, "bounded: " + millis + " ms");
            assertTrue(e.getMessage().contains(Lab.addr1()), e.getMessage());
            client.close();
        }
        RdmaResources after = RdmaResources.awaitEqual(before, 10_000);
        assertEquals(before, after, "rdma resource show counts return to where they started");
    }

    @Test
    void connectAndClose200TimesLeaksNoNativeResource() throws Exception {
        RdmaResources before = RdmaResources.afterWarmUp();
        try (VerbsFabric fabric = new VerbsFabric()) {
            AtomicReference<RawPeer> serverSide = new AtomicReference<>();
            CompletableFuture<?>[] accepted = new CompletableFuture<?>[1];
            FabricListener listener = fabric.listen(Lab.address(Lab.addr1(), Lab.freshPort()), request -> {
                RawPeer server = new RawPeer(4, 1, 0);
                serverSide.set(server);
                try {
                    request.accept(server, new byte[0], 7, server);
                } catch (FabricException e) {
                    accepted[0].completeExceptionally(e);
                }
            });
            for (int i = 0; i < 200; i++) {
                accepted[0] = new CompletableFuture<>();
                RawPeer client = new RawPeer(4, 1, 0);
                fabric.connect(listener.localAddress(), client, CONNECT, client);
                RawPeer server = serverSide.get();
                assertTrue(server.established.await(20, TimeUnit.SECONDS), "iteration " + i);
                client.close(); // disconnect, destroy qp and id, then cq and memory
                assertTrue(server.disconnected.await(20, TimeUnit.SECONDS), "server sees DISCONNECTED, iteration " + i);
                server.close();
                assertTrue(!accepted[0].isCompletedExceptionally(), "accept failed in iteration " + i);
            }
            listener.close();
        }
        RdmaResources after = RdmaResources.awaitEqual(before, 20_000);
        assertEquals(before, after, "rdma resource show counts return to where they started");
    }
}
