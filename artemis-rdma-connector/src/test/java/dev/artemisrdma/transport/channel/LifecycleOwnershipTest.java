package dev.artemisrdma.transport.channel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.ChannelAcceptor;
import dev.artemisrdma.transport.Connection;
import dev.artemisrdma.transport.FakeFabric;
import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.TransportHooks;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.loop.CompletionLoop;

/**
 * Who destroys and frees what, when threads race a connection's set-up and teardown: a handshake deadline that
 * passes while the accept is under way, a loop that dies while a channel waits for it to release, a loop thread
 * that outlives the transport's wait at close, and the proof that a shared channel's drain saw the peer's last
 * frames. Each fails on the code before the lifecycle had one owner.
 */
class LifecycleOwnershipTest {

    private static TransportConfig.Builder small() {
        return TransportConfig.builder().sharedReceiveQueue(false).rnrRetryCount(0).busyPollMicros(0).receiveSlots(8)
                .slotSize(1024).connectTimeout(Duration.ofSeconds(5));
    }

    /** Hands each accepted channel the next of {@code handlers}, and keeps the channels. */
    private static final class Acceptor implements ChannelAcceptor {
        final List<? extends ChannelHandler> handlers;
        final AtomicInteger next = new AtomicInteger();
        final List<RdmaChannel> accepted = new java.util.concurrent.CopyOnWriteArrayList<>();

        Acceptor(List<? extends ChannelHandler> handlers) {
            this.handlers = handlers;
        }

        /** Recorded as the request arrives: a test follows channels whose handshake never ends too. */
        @Override
        public void admit(RdmaChannel channel) {
            accepted.add(channel);
        }

        @Override
        public ChannelHandler onAccepted(RdmaChannel channel) {
            return handlers.get(Math.min(next.getAndIncrement(), handlers.size() - 1));
        }
    }

    private static void assertAllReleased(FakeFabric fabric) throws InterruptedException {
        Peers.await("queue pairs destroyed", 5000, () -> fabric.liveQueuePairs() == 0);
        Peers.await("completion queues destroyed", 5000, () -> fabric.liveCompletionQueues() == 0);
        Peers.await("memory deregistered", 5000, () -> fabric.liveMemoryRegions() == 0);
        fabric.assertNoViolations();
    }

    @Test
    void aHandshakeDeadlineThatPassesDuringTheAcceptLeavesNoQueuePairBehind() throws Exception {
        FakeFabric fabric = new FakeFabric();
        RdmaTransport server = RdmaTransport.create(fabric, small().handshakeTimeout(Duration.ofMillis(100)).build());
        RdmaTransport client = RdmaTransport.create(fabric, small().build());
        Peers.Recorder first = new Peers.Recorder();
        Peers.Recorder second = new Peers.Recorder();
        Acceptor acceptor = new Acceptor(List.of(first, second));
        RdmaServer listener = server.listen(Peers.serverAddress(), acceptor);
        // the accept stalls between binding the channel and preparing its queue pair until the deadline released it
        fabric.beforeAcceptPrepare(qpn -> {
            if (acceptor.accepted.size() == 1) {
                RdmaChannelImpl stalled = (RdmaChannelImpl) acceptor.accepted.get(0);
                try {
                    Peers.await("the deadline to release the channel", 5000,
                            () -> stalled.state().compareTo(ChannelState.RELEASING) >= 0);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        });

        FabricException refused = assertThrows(FabricException.class,
                () -> client.connect(listener.localAddress(), new Peers.Recorder()),
                "the client was connected to a channel its server had already released");
        RdmaChannelImpl released = (RdmaChannelImpl) acceptor.accepted.get(0);
        Peers.await("the released channel closed", 5000, released::isClosed);
        FabricException why = released.closeCause();
        assertNotNull(why);
        assertFalse(first.closed.isDone(), "never established: no handler was made for it");
        assertTrue(why.getMessage().contains("did not complete its handshake"), why.getMessage());
        assertTrue(refused.getMessage().contains("before its queue pair was ready"), refused.getMessage());
        assertEquals(0, server.channelCount(), "the released channel is still counted");

        // the next connection is served as usual; it is the first one the application sees
        Peers.Recorder replies = new Peers.Recorder();
        RdmaChannel ok = client.connect(listener.localAddress(), replies);
        ok.write(ByteBuffer.wrap(new byte[] {1, 2, 3}), true);
        Peers.await("a frame on the next connection", 5000, () -> first.count() == 1);
        assertEquals(0, second.count());
        ok.close();

        client.close();
        server.close();
        assertAllReleased(fabric);
        fabric.close();
    }

    @Test
    void aChannelWaitingForItsLoopToReleaseItIsReleasedWhenTheLoopDies() throws Exception {
        // since issue 39 the deadline no longer moves b to RELEASING on the timer's thread: the loop does; what waits
        // for the dying loop is the expiry itself
        FakeFabric fabric = new FakeFabric();
        RdmaTransport server = RdmaTransport.create(fabric, small().completionThreads(1)
                .handshakeTimeout(Duration.ofMillis(150)).build());
        RdmaTransport client = RdmaTransport.create(fabric, small().build());
        Peers.HoldingRecorder busy = new Peers.HoldingRecorder();
        Peers.Recorder releasing = new Peers.Recorder();
        Acceptor acceptor = new Acceptor(List.of(busy, releasing));
        RdmaServer listener = server.listen(Peers.serverAddress(), acceptor);
        Peers.Recorder busyPeer = new Peers.Recorder();
        RdmaChannel a = client.connect(listener.localAddress(), busyPeer);
        RdmaChannelImpl serverA = (RdmaChannelImpl) acceptor.accepted.get(0);

        // the loop is held inside a handler (a busy loop, made to order): it ticks nobody meanwhile
        a.write(ByteBuffer.wrap(new byte[] {1}), true);
        assertTrue(busy.inHandler.await(5, TimeUnit.SECONDS));
        AtomicReference<Throwable> hookFailure = new AtomicReference<>();
        fabric.beforeAcceptPrepare(qpn -> {
            try {
                RdmaChannelImpl b = (RdmaChannelImpl) acceptor.accepted.get(1);
                // the deadline passes: its expiry waits for b's (held) loop, which alone tears b down and releases
                // its memory and loop slot
                Peers.await("the deadline to ask b's loop", 5000, b::commandsPending);
                assertEquals(ChannelState.CONNECTING, b.state(), "the timer moved b itself");
                // then the loop dies at its next poll, before any tick could run the expiry: dying, it must still
                // run it, and release b (nobody else would)
                fabric.failNextPoll(serverA.qpNumber(), new FabricException("ibv_poll_cq failed (EIO)"));
                busy.release.countDown();
                Peers.await("the loop to die", 5000,
                        () -> TransportHooks.completionLoops(server, fabric.device()) == 0);
            } catch (Throwable t) {
                hookFailure.set(t);
            }
        });
        assertThrows(FabricException.class, () -> client.connect(listener.localAddress(), new Peers.Recorder()));
        assertEquals(null, hookFailure.get());

        RdmaChannelImpl b = (RdmaChannelImpl) acceptor.accepted.get(1);
        Peers.await("the releasing channel released", 5000, b::isClosed);
        FabricException why = b.closeCause();
        assertNotNull(why, "the releasing channel was never released");
        assertTrue(why.getMessage().contains("did not complete its handshake"), why.getMessage());
        assertTrue(busy.closed.get(5, TimeUnit.SECONDS).getMessage().contains("completion loop"));
        Peers.await("the dead loop's queue destroyed", 5000, () -> fabric.liveCompletionQueues() == 1);

        client.close();
        server.close();
        assertAllReleased(fabric);
        fabric.close();
    }

    @Test
    void aLoopThreadThatOutlivesTheCloseWaitHasNothingFreedUnderIt() throws Exception {
        FakeFabric fabric = new FakeFabric();
        // every send signaled: the server's send buffer is back in its slab before the loop is stuck
        RdmaTransport server = TransportHooks.loopStopWait(RdmaTransport.create(fabric, small().completionThreads(1)
                .signalInterval(1).closeTimeout(Duration.ofMillis(200)).build()), Duration.ofMillis(200));
        RdmaTransport client = RdmaTransport.create(fabric, small().build());
        CountDownLatch inHandler = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        Peers.Recorder stuck = new Peers.Recorder() {
            @Override
            public void onFrame(RdmaChannel channel, ByteBuffer frame) {
                super.onFrame(channel, frame);
                inHandler.countDown();
                try {
                    release.await(20, TimeUnit.SECONDS); // a handler stuck far past the transport's wait
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        };
        Acceptor acceptor = new Acceptor(List.of(stuck));
        RdmaServer listener = server.listen(Peers.serverAddress(), acceptor);
        Peers.Recorder peer = new Peers.Recorder();
        RdmaChannel a = client.connect(listener.localAddress(), peer);
        RdmaChannel serverSide = acceptor.accepted.get(0);
        serverSide.write(ByteBuffer.wrap(new byte[2000]), true); // the server's send pool takes a slab
        Peers.await("the server's frame", 5000, () -> peer.count() == 1);
        a.write(ByteBuffer.wrap(new byte[] {1}), true);
        assertTrue(inHandler.await(5, TimeUnit.SECONDS));

        int freedBefore = fabric.deregistrations().size();
        int queuesBefore = fabric.liveCompletionQueues();
        CompletableFuture<Void> closing = CompletableFuture.runAsync(server::close);
        closing.get(10, TimeUnit.SECONDS); // returns although the loop thread is stuck
        assertEquals(List.of(), fabric.deregistrations().subList(freedBefore, fabric.deregistrations().size()),
                "memory was deregistered under a loop thread that is still running");
        assertEquals(queuesBefore, fabric.liveCompletionQueues(), "the stuck loop's queue was destroyed under it");

        release.countDown();
        Peers.await("the stuck loop's memory released once it exits", 10_000,
                () -> fabric.deregistrations().size() > freedBefore);
        for (FakeFabric.Deregistration d : fabric.deregistrations().subList(freedBefore,
                fabric.deregistrations().size())) {
            assertTrue(d.thread().contains("-cq"), "freed on " + d.thread() + ", not the loop that used it");
        }
        client.close();
        assertAllReleased(fabric);
        fabric.close();
    }

    /**
     * A shared channel's drain is proven by a poll that began after the drain did and found the queue drained. The
     * batch being handled when the drain is first looked at began before it: the peer's last SENDs (its goodbye
     * among them) may have completed after that poll, so its end proves nothing. Here the peer's second frame
     * completes while the first frame's batch is held: that batch's end must not count, the next poll's must.
     */
    @Test
    void theDrainProofCountsOnlyPollsThatBeganAfterTheDrain() throws Exception {
        TransportConfig shared = small().sharedReceiveQueue(true).completionThreads(1).build();
        AtomicReference<CompletionLoop> loop = new AtomicReference<>();
        AtomicReference<Boolean> provenAtSecondFrame = new AtomicReference<>();
        AtomicReference<Boolean> provenAtThirdFrame = new AtomicReference<>();
        long[] fence = {-1};
        CountDownLatch secondSent = new CountDownLatch(1);
        Peers.Recorder server = new Peers.Recorder() {
            @Override
            public void onFrame(RdmaChannel channel, ByteBuffer frame) {
                super.onFrame(channel, frame);
                CompletionLoop l = loop.get();
                if (count() == 1) {
                    fence[0] = l.pollsBegun(); // as a drain first looked at during this batch takes it
                    try {
                        assertTrue(secondSent.await(5, TimeUnit.SECONDS));
                        Thread.sleep(50); // the second frame completes on our queue while this batch is handled
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                } else if (count() == 2) {
                    provenAtSecondFrame.set(l.drainedSince(fence[0]));
                } else if (count() == 3) {
                    provenAtThirdFrame.set(l.drainedSince(fence[0])); // the second frame's poll began after it
                }
            }
        };
        FakeFabric fabric = new FakeFabric();
        try (Connection c = new Connection(fabric, shared, small().build(), server, new Peers.Recorder())) {
            RdmaChannelImpl serverChannel = (RdmaChannelImpl) c.serverChannel;
            assertTrue(serverChannel.sharesReceives());
            loop.set(TransportHooks.loops(c.serverTransport, fabric.device()).get(0));
            c.client.write(ByteBuffer.wrap(new byte[] {1}), true);
            Peers.await("the first frame in the handler", 5000, () -> server.count() == 1);
            c.client.write(ByteBuffer.wrap(new byte[] {2}), true);
            secondSent.countDown();
            // the frame is counted before the handler records what it saw: wait for the record itself
            Peers.await("the second frame", 5000, () -> provenAtSecondFrame.get() != null);
            assertFalse(provenAtSecondFrame.get(), "the held batch, which began before the fence, proved the drain");
            c.client.write(ByteBuffer.wrap(new byte[] {3}), true);
            Peers.await("the third frame", 5000, () -> provenAtThirdFrame.get() != null);
            assertTrue(provenAtThirdFrame.get(), "a poll that began after the fence and drained the queue proved nothing");
        }
    }

    /**
     * The device is removed while a transport is closing (in the lab: rdma link delete racing RdmaTransport.close,
     * found by OwnershipLabTest). The closing transport must hold the device until its close has released its
     * channels, loops and memory there: letting go at once had the fabric free the device under it (ibv_dealloc_pd
     * EBUSY under queue pairs still closing, a completion queue still polled and kept), and the kernel could not finish
     * the removal until the fabric was closed.
     */
    @Test
    void aDeviceRemovedWhileATransportClosesIsFreedOnlyAfterThatClose() throws Exception {
        Peers.HoldingRecorder held = new Peers.HoldingRecorder();
        FakeFabric fabric = new FakeFabric();
        TransportConfig config = small().closeTimeout(Duration.ofSeconds(2)).build();
        try (Connection c = new Connection(fabric, config, config, new Peers.Recorder(), held)) {
            FabricDevice device = fabric.device();
            c.serverChannel.write(ByteBuffer.wrap(new byte[] {1}), true);
            assertTrue(held.inHandler.await(5, TimeUnit.SECONDS), "the client's loop busy in its handler");
            Thread closer = new Thread(c.clientTransport::close, "closer");
            closer.start();
            Peers.await("the client transport closing its channels", 5000,
                    () -> closer.getState() == Thread.State.WAITING || closer.getState() == Thread.State.TIMED_WAITING);
            fabric.removeDevice();
            assertNotNull(c.serverSide.closed.get(5, TimeUnit.SECONDS), "the server's channel failed");
            Thread.sleep(300); // the server transport lets go of the device within 50 ms of its channel's release
            assertFalse(fabric.releasedDevices().contains(device),
                    "the device was freed while the closing transport's loop still ran on it");
            held.release.countDown();
            closer.join(10_000);
            assertFalse(closer.isAlive(), "the client transport's close returned");
            Peers.await("the device freed after the close", 5000, () -> fabric.releasedDevices().contains(device));
            assertAllReleased(fabric);
        }
    }
}
