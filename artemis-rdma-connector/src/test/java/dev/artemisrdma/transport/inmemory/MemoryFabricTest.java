package dev.artemisrdma.transport.inmemory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.fabric.CompletionQueue;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.ConnectOptions;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.FabricListener;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.fabric.QueuePairSpec;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.fabric.RegisteredMemory;
import dev.artemisrdma.transport.fabric.SendList;
import dev.artemisrdma.transport.fabric.WcStatus;

/**
 * The fast mode applies the verbs rules of the core ({@link VerbsRules}, {@link Execution}, {@link Registry}) as the
 * strict mode does (FakeFabricTest checks those through FakeFabric): what a SEND does to the peer's receive, its
 * completions' statuses, and the post checks. Raw SPI, no transport.
 */
class MemoryFabricTest {
    private MemoryFabric fabric;
    private CompletionQueue cqA;
    private CompletionQueue cqB;
    private RegisteredMemory memA;
    private RegisteredMemory memB;
    private QueuePair a;
    private QueuePair b;
    private final Completions wc = new Completions(64);

    @BeforeEach
    void connect() throws Exception {
        fabric = new MemoryFabric();
        FabricDevice device = fabric.device();
        cqA = device.createCompletionQueue(64);
        cqB = device.createCompletionQueue(64);
        memA = device.register(4096);
        memB = device.register(4096);
        CompletableFuture<QueuePair> established = new CompletableFuture<>();
        QueuePairEvents passiveEvents = new QueuePairEvents() {
            @Override
            public void established(QueuePair queuePair) {
                established.complete(queuePair);
            }

            @Override
            public void disconnected(QueuePair queuePair, String reason) {
            }
        };
        FabricListener l = fabric.listen(new InetSocketAddress("127.0.0.1", 0), req -> {
            try {
                req.accept(setup(cqB), new byte[] {1}, 7, passiveEvents);
            } catch (FabricException e) {
                established.completeExceptionally(e);
            }
        });
        a = fabric.connect(l.localAddress(), setup(cqA), new ConnectOptions(new byte[] {2}, 7, 7,
                Duration.ofSeconds(5)), (qp, reason) -> { });
        b = established.get(5, TimeUnit.SECONDS);
        l.close();
    }

    private static ConnectionSetup setup(CompletionQueue cq) {
        return new ConnectionSetup() {
            @Override
            public QueuePairSpec queuePairSpec(FabricDevice device) {
                return new QueuePairSpec(cq, 8, 8, 2, 1, 64);
            }

            @Override
            public void prepare(QueuePair queuePair) {
            }
        };
    }

    @AfterEach
    void close() {
        fabric.close();
    }

    /** The next {@code n} completions of {@code cq}: wrId, status, byte length, immediate. */
    private List<long[]> poll(CompletionQueue cq, int n) throws Exception {
        List<long[]> got = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (got.size() < n && System.nanoTime() < deadline) {
            int k = cq.poll(wc);
            for (int i = 0; i < k; i++) {
                got.add(new long[] {wc.wrId(i), wc.status(i), wc.byteLength(i), wc.immediate(i)});
            }
        }
        assertEquals(n, got.size(), "completions");
        return got;
    }

    private SendList send(long wrId, int length, int flags) {
        return new SendList(4, 8).addSend(wrId, flags).addSge(memA.address(), length, memA.lkey());
    }

    @Test
    void aSendArrivesInThePostedReceiveWithItsImmediateData() throws Exception {
        memA.buffer().put(99, (byte) 42);
        b.postRecv(new RecvList(1).add(7, memB.address(), 100, memB.lkey()));
        a.postSend(send(5, 100, SendList.FLAG_SIGNALED | SendList.FLAG_IMMEDIATE).withImmediate(0xCAFE_F00D));
        long[] received = poll(cqB, 1).get(0);
        assertEquals(List.of(7L, (long) WcStatus.SUCCESS, 100L, 0xCAFE_F00DL), List.of(received[0], received[1],
                received[2], received[3]));
        long[] sent = poll(cqA, 1).get(0);
        assertEquals(List.of(5L, (long) WcStatus.SUCCESS), List.of(sent[0], sent[1]));
        assertEquals(42, memB.buffer().get(99), "the bytes were copied");
        assertEquals(1, fabric.sends());
    }

    @Test
    void aSendOutsideRegisteredMemoryFailsLocProtAndConsumesNoReceive() throws Exception {
        b.postRecv(new RecvList(1).add(7, memB.address(), 100, memB.lkey()));
        // the right lkey, a range that runs one byte past the registration
        a.postSend(new SendList(4, 8).addSend(5, SendList.FLAG_SIGNALED).addSge(memA.address() + 1, 4096,
                memA.lkey()));
        assertEquals(WcStatus.LOC_PROT_ERR, poll(cqA, 1).get(0)[1]);
        assertEquals(0, cqB.poll(wc), "the receive was not consumed");
        b.close();
        long[] flushed = poll(cqB, 1).get(0);
        assertEquals(List.of(7L, (long) WcStatus.WR_FLUSH_ERR), List.of(flushed[0], flushed[1]),
                "it is still posted: its destroy flushes it");
    }

    @Test
    void aSendLongerThanTheReceiveFailsBothSides() throws Exception {
        b.postRecv(new RecvList(1).add(7, memB.address(), 50, memB.lkey()));
        a.postSend(send(5, 100, SendList.FLAG_SIGNALED));
        assertEquals(WcStatus.LOC_LEN_ERR, poll(cqB, 1).get(0)[1]);
        assertEquals(WcStatus.REM_INV_REQ_ERR, poll(cqA, 1).get(0)[1]);
        assertTrue(!a.isEstablished() && !b.isEstablished(), "both queue pairs went to error");
    }

    @Test
    void postsThatBreakTheCapsAreRefusedWithTheProvidersErrno() throws Exception {
        SendList threeSges = new SendList(4, 8).addSend(1, SendList.FLAG_SIGNALED)
                .addSge(memA.address(), 8, memA.lkey()).addSge(memA.address() + 8, 8, memA.lkey())
                .addSge(memA.address() + 16, 8, memA.lkey());
        assertTrue(assertThrows(FabricException.class, () -> a.postSend(threeSges)).getMessage().contains("EINVAL"));
        SendList longInline = send(2, 65, SendList.FLAG_SIGNALED | SendList.FLAG_INLINE);
        assertTrue(assertThrows(FabricException.class, () -> a.postSend(longInline)).getMessage().contains("EINVAL"));
        RecvList nine = new RecvList(9);
        for (int i = 0; i < 9; i++) {
            nine.add(i, memB.address() + 100L * i, 100, memB.lkey());
        }
        assertTrue(assertThrows(FabricException.class, () -> b.postRecv(nine)).getMessage().contains("ENOMEM"),
                "more receives than the queue's depth (8)");
        assertEquals(0, fabric.sends());
    }

    @Test
    void aSendWithoutAReceiveWaitsAndGoesWhenOneIsPosted() throws Exception {
        memA.buffer().put(0, (byte) 7);
        a.postSend(send(5, 10, SendList.FLAG_SIGNALED | SendList.FLAG_INLINE));
        memA.buffer().put(0, (byte) 8); // an inline SEND was copied at its post: the buffer is the caller's again
        assertEquals(1, fabric.rnrWaits());
        assertEquals(0, cqA.poll(wc), "nothing completes while no receive is posted");
        b.postRecv(new RecvList(1).add(7, memB.address(), 100, memB.lkey()));
        assertEquals(10, poll(cqB, 1).get(0)[2]);
        assertEquals(WcStatus.SUCCESS, poll(cqA, 1).get(0)[1]);
        assertEquals(7, memB.buffer().get(0), "the bytes as they were at the post");
    }
}
