package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;

/**
 * Issue 37, hole 6: the application's {@code onAccepted} (for Artemis a {@code Connection} and its plugins) may be
 * slow, and the connection-manager thread serves every connection of the fabric: it must never wait for it, whether
 * rdma_cm's ESTABLISHED comes first (it used to make the handler itself) or the peer's first frame does (the loop
 * made it holding HandlerSlot's monitor, and ESTABLISHED then waited on that monitor). "Every CM event" is probed by
 * running a task on the fake fabric's connection-manager thread, where every connection event is delivered.
 */
class SlowAcceptorTest {

    /** An acceptor whose first onAccepted is held until the test lets it go, as a slow connection plugin is. */
    private static final class SlowAcceptor implements ChannelAcceptor {
        final CountDownLatch entered = new CountDownLatch(1);
        final CountDownLatch letGo = new CountDownLatch(1);
        final AtomicInteger calls = new AtomicInteger();
        final AtomicReference<String> thread = new AtomicReference<>();
        final Peers.Recorder handler = new Peers.Recorder();

        @Override
        public ChannelHandler onAccepted(RdmaChannel channel) {
            calls.incrementAndGet();
            thread.set(Thread.currentThread().getName());
            entered.countDown();
            try {
                letGo.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return handler;
        }
    }

    private static TransportConfig config() {
        return TransportConfig.builder().busyPollMicros(0).build();
    }

    /** Whether the connection-manager thread runs a task within a generous bound (it is idle otherwise). */
    private static boolean cmThreadAnswers(FakeFabric fabric) throws Exception {
        try {
            fabric.cm.submit(() -> { }).get(10, TimeUnit.SECONDS);
            return true;
        } catch (TimeoutException e) {
            return false;
        }
    }

    @Test
    void aSlowOnAcceptedHoldsNoConnectionEventWhenEstablishedComesFirst() throws Exception {
        FakeFabric fabric = new FakeFabric();
        SlowAcceptor acceptor = new SlowAcceptor();
        try (RdmaTransport server = RdmaTransport.create(fabric, config());
             RdmaTransport client = RdmaTransport.create(fabric, config())) {
            RdmaServer s = server.listen(Peers.serverAddress(), acceptor);
            Peers.Recorder clientSide = new Peers.Recorder();
            RdmaChannel ch = client.connect(s.localAddress(), clientSide);
            assertTrue(acceptor.entered.await(10, TimeUnit.SECONDS), "onAccepted was called");
            try {
                assertTrue(cmThreadAnswers(fabric), "the connection-manager thread waits for a slow onAccepted");
                assertNotEquals("fake-rdma-cm", acceptor.thread.get(), "onAccepted ran on the connection-manager "
                        + "thread");
            } finally {
                acceptor.letGo.countDown();
            }
            byte[] frame = Peers.payload(37, 6, 300);
            ch.write(ByteBuffer.wrap(frame), true);
            Peers.await("the frame delivered once the handler is made", 10_000, () -> acceptor.handler.count() == 1);
            assertEquals(Peers.crc(frame), acceptor.handler.crcs.get(0));
            assertEquals(1, acceptor.calls.get(), "onAccepted once");
        } finally {
            acceptor.letGo.countDown();
            fabric.close();
        }
        fabric.assertNoViolations();
    }

    @Test
    void aSlowOnAcceptedOnTheLoopHoldsNoConnectionEventWhenThePeersFirstFrameComesFirst() throws Exception {
        FakeFabric fabric = new FakeFabric();
        fabric.holdPassiveEstablished(true);
        SlowAcceptor acceptor = new SlowAcceptor();
        try (RdmaTransport server = RdmaTransport.create(fabric, config());
             RdmaTransport client = RdmaTransport.create(fabric, config())) {
            RdmaServer s = server.listen(Peers.serverAddress(), acceptor);
            Peers.Recorder clientSide = new Peers.Recorder();
            RdmaChannel ch = client.connect(s.localAddress(), clientSide);
            byte[] first = Peers.payload(37, 7, 200);
            ch.write(ByteBuffer.wrap(first), true); // beats ESTABLISHED: the server's loop makes the handler
            assertTrue(acceptor.entered.await(10, TimeUnit.SECONDS), "onAccepted was called for the first frame");
            try {
                assertEquals(1, fabric.deliverHeldEstablished(), "rdma_cm's ESTABLISHED arrives meanwhile");
                assertTrue(cmThreadAnswers(fabric), "the connection-manager thread waits for onAccepted on the loop");
            } finally {
                acceptor.letGo.countDown();
            }
            Peers.await("the first frame delivered", 10_000, () -> acceptor.handler.count() == 1);
            assertEquals(Peers.crc(first), acceptor.handler.crcs.get(0));
            assertEquals(1, acceptor.calls.get(), "onAccepted once, though both threads saw the connection up");
            assertTrue(ch.isOpen());
        } finally {
            acceptor.letGo.countDown();
            fabric.close();
        }
        fabric.assertNoViolations();
    }
}
