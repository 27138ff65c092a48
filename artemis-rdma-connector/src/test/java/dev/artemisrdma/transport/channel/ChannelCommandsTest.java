package dev.artemisrdma.transport.channel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.Connection;
import dev.artemisrdma.transport.FakeFabric;
import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;

/**
 * Issue 39: rdma_cm's events, the handshake deadline and close/forceClose (first slice), and the outcome of a
 * connect or accept (third slice: CONNECTED, SETUP_FAILED) reach a channel as requests to its completion loop
 * ({@link ChannelCommands}), and only the loop moves the channel's state for them. Each test counts the state moves
 * made off the loop thread ({@link RdmaChannelImpl#movesOffLoop}), or holds the loop in a handler to show that the
 * asking thread changes nothing and the loop does once released.
 */
class ChannelCommandsTest {

    private static TransportConfig config() {
        return TransportConfig.builder().sharedReceiveQueue(false).rnrRetryCount(0).busyPollMicros(0).receiveSlots(8)
                .slotSize(1024).closeTimeout(Duration.ofSeconds(2)).connectTimeout(Duration.ofSeconds(5)).build();
    }

    /** One completion loop: a handler that holds it holds every channel of its transport. */
    private static TransportConfig oneLoop() {
        return TransportConfig.builder().sharedReceiveQueue(false).rnrRetryCount(0).busyPollMicros(0).receiveSlots(8)
                .slotSize(1024).completionThreads(1).connectTimeout(Duration.ofSeconds(5)).build();
    }

    /**
     * One connection whose handler holds its loop (a busy loop, made to order): the held side's transport has one
     * completion loop, so every other channel it makes waits for that handler. Each request's channel goes to
     * {@code admitted}, each established one to {@code accepted}. Closing lets the loop go and checks the fabric.
     */
    private static final class HeldLoop implements AutoCloseable {
        final FakeFabric fabric = new FakeFabric();
        final Peers.HoldingRecorder busy = new Peers.HoldingRecorder();
        final List<RdmaChannel> admitted = new CopyOnWriteArrayList<>();
        final List<RdmaChannel> accepted = new CopyOnWriteArrayList<>();
        final RdmaTransport server;
        final RdmaTransport client;
        final RdmaServer listener;

        /** {@code serverHeld}: the server's loop is held (the server's handler), else the client's. */
        HeldLoop(boolean serverHeld) throws Exception {
            server = RdmaTransport.create(fabric, serverHeld ? oneLoop() : config());
            client = RdmaTransport.create(fabric, serverHeld ? config() : oneLoop());
            listener = server.listen(Peers.serverAddress(), Peers.admittingEach(admitted::add, channel -> {
                accepted.add(channel);
                return serverHeld && accepted.size() == 1 ? busy : new Peers.Recorder();
            }));
            RdmaChannel first = client.connect(listener.localAddress(), serverHeld ? new Peers.Recorder() : busy);
            Peers.await("the first accepted", 5000, () -> accepted.size() == 1);
            (serverHeld ? first : accepted.get(0)).write(ByteBuffer.wrap(new byte[] {1}), true);
            assertTrue(busy.inHandler.await(5, TimeUnit.SECONDS), "the loop busy in its handler");
        }

        @Override
        public void close() {
            busy.release.countDown();
            client.close();
            server.close();
            fabric.close();
            fabric.assertNoViolations();
        }
    }

    /** A recorder that counts its onClosed calls and the threads they came on. */
    private static final class Closes extends Peers.Recorder {
        final AtomicInteger calls = new AtomicInteger();
        final List<String> threads = new CopyOnWriteArrayList<>();

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
            calls.incrementAndGet();
            threads.add(Thread.currentThread().getName());
            super.onClosed(channel, cause);
        }
    }

    @Test
    void aCloseAskedOnAnotherThreadIsCarriedOutByTheLoop() throws Exception {
        Closes clientSide = new Closes();
        Closes serverSide = new Closes();
        try (Connection c = new Connection(new FakeFabric(), config(), config(), serverSide, clientSide)) {
            RdmaChannelImpl client = (RdmaChannelImpl) c.client;
            RdmaChannelImpl server = (RdmaChannelImpl) c.serverChannel;
            c.client.write(ByteBuffer.wrap(new byte[] {1, 2, 3}), true);
            Peers.await("the frame", 5000, () -> serverSide.count() == 1);
            int clientBefore = client.movesOffLoop();
            int serverBefore = server.movesOffLoop();

            c.client.close(); // this thread asks; the client's loop says goodbye, disconnects, drains and releases
            assertTrue(client.isClosed(), "close() returned before the loop released the channel");
            Peers.await("the server's channel closed", 5000, server::isClosed);
            assertNull(clientSide.closed.get(5, TimeUnit.SECONDS), "a clean local close has no cause");
            FabricException peerCause = serverSide.closed.get(5, TimeUnit.SECONDS);
            assertTrue(peerCause.getMessage().contains("closed the connection"), peerCause.getMessage());
            assertEquals(clientBefore, client.movesOffLoop(), "the closing thread moved the client's channel");
            assertEquals(serverBefore, server.movesOffLoop(),
                    "rdma_cm's DISCONNECTED moved the server's channel on the event thread");
            assertEquals(1, clientSide.calls.get());
            assertEquals(1, serverSide.calls.get());
        }
    }

    /**
     * A writer's failure (its outbox over maxQueuedBytesPerConnection toward a peer that takes nothing) is recorded on
     * the writer's thread and applied by the channel's loop: the writer gets the cause, every later write is refused
     * with it at once (also while the loop has not yet run the request), the handler hears it once, on the loop, and
     * no state moved off the loop.
     */
    @Test
    void aWritersFailureIsAppliedByTheLoopAndRefusesLaterWritesAtOnce() throws Exception {
        TransportConfig config = TransportConfig.builder().sharedReceiveQueue(false).rnrRetryCount(0)
                .busyPollMicros(0).receiveSlots(8).slotSize(1024).maxFrameSize(16 << 10).writeHighWaterMark(16 << 10)
                .maxQueuedBytesPerConnection(64 << 10).connectTimeout(Duration.ofSeconds(5)).build();
        Closes clientSide = new Closes();
        try (Connection c = new Connection(new FakeFabric(), config, config, new Peers.Recorder(), clientSide)) {
            RdmaChannelImpl client = (RdmaChannelImpl) c.client;
            c.serverChannel.setAutoRead(false); // the peer returns no credit: the client's frames stay queued
            FabricException refused = null;
            for (int i = 0; i < 1000 && refused == null; i++) {
                try {
                    c.client.write(ByteBuffer.wrap(Peers.payload(1, i, 1000)), true);
                } catch (FabricException e) {
                    refused = e;
                }
            }
            assertNotNull(refused, "the outbox was never over its cap");
            assertTrue(refused.getMessage().contains("maxQueuedBytesPerConnection"), refused.getMessage());
            assertFalse(client.isOpen(), "a write after the writer's failure would be taken");
            FabricException later = assertThrows(FabricException.class,
                    () -> c.client.write(ByteBuffer.wrap(new byte[] {1}), true));
            assertTrue(later.getMessage().contains("maxQueuedBytesPerConnection"), later.getMessage());
            FabricException cause = clientSide.closed.get(5, TimeUnit.SECONDS);
            assertTrue(cause != null && cause.getMessage().contains("maxQueuedBytesPerConnection"), "closed with "
                    + cause);
            Peers.await("the client's channel closed", 5000, client::isClosed);
            assertEquals(1, clientSide.calls.get());
            assertTrue(clientSide.threads.get(0).contains("-cq"), "the handler heard it on " + clientSide.threads);
            assertEquals(0, client.movesOffLoop(), "the writer moved the channel: " + client.path());
        }
    }

    /**
     * The loop is busy (its handler holds a frame): a forceClose from another thread waits for it. Writes are refused
     * at once, but the state stays where it was until the loop runs the request, and then it moves there.
     */
    @Test
    void aForceCloseWaitsForABusyLoopAndWritesAreRefusedMeanwhile() throws Exception {
        Peers.HoldingRecorder clientSide = new Peers.HoldingRecorder();
        try (Connection c = new Connection(new FakeFabric(), config(), config(), new Peers.Recorder(), clientSide)) {
            RdmaChannelImpl client = (RdmaChannelImpl) c.client;
            c.serverChannel.write(ByteBuffer.wrap(new byte[] {1}), true);
            assertTrue(clientSide.inHandler.await(5, TimeUnit.SECONDS), "the client's loop busy in its handler");
            int before = client.movesOffLoop();

            CompletableFuture<Void> closing = CompletableFuture.runAsync(client::forceClose);
            Peers.await("the forceClose asked of the busy loop", 5000, client::commandsPending);
            assertFalse(client.isOpen(), "a write after forceClose() would be taken");
            assertThrows(FabricException.class, () -> client.write(ByteBuffer.wrap(new byte[] {2}), true));
            Thread.sleep(50);
            assertEquals(ChannelState.OPEN, client.state(), "a thread other than the loop moved the channel");

            clientSide.release.countDown();
            closing.get(10, TimeUnit.SECONDS);
            Peers.await("the client's channel closed", 5000, client::isClosed);
            assertEquals(before, client.movesOffLoop(), "the forcing thread moved the channel");
            // rdma_cm's DISCONNECTED for our own disconnect may come after the release: the loop still runs it
            Peers.await("nothing left for the loop", 5000, () -> !client.commandsPending());
        } finally {
            clientSide.release.countDown();
        }
    }

    /**
     * rdma_cm's DISCONNECTED (the server forces its side shut) races the client's own orderly close, both asked
     * from threads that are not the client's loop, round after round: each side ends closed, each handler hears it
     * once, on its loop, and nothing is left behind.
     */
    @Test
    void aDisconnectRacingACloseEndsOnceOnEachSide() throws Exception {
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport serverTransport = RdmaTransport.create(fabric, config());
             RdmaTransport clientTransport = RdmaTransport.create(fabric, config())) {
            for (int round = 0; round < 30; round++) {
                Closes serverSide = new Closes();
                Closes clientSide = new Closes();
                CompletableFuture<RdmaChannel> accepted = new CompletableFuture<>();
                RdmaServer listener = serverTransport.listen(Peers.serverAddress(),
                        Peers.admitting(ch -> { }, accepted::complete, serverSide));
                RdmaChannelImpl client = (RdmaChannelImpl) clientTransport.connect(listener.localAddress(),
                        clientSide);
                RdmaChannelImpl server = (RdmaChannelImpl) accepted.get(5, TimeUnit.SECONDS);
                Peers.await("the server's channel open", 5000, () -> server.state() == ChannelState.OPEN);
                client.write(ByteBuffer.wrap(Peers.payload(round, 0, 100)), round % 2 == 0);
                int clientBefore = client.movesOffLoop();
                int serverBefore = server.movesOffLoop();

                CountDownLatch go = new CountDownLatch(1);
                CompletableFuture<Void> closing = CompletableFuture.runAsync(() -> {
                    await(go);
                    client.close();
                });
                CompletableFuture<Void> forcing = CompletableFuture.runAsync(() -> {
                    await(go);
                    server.forceClose();
                });
                go.countDown();
                closing.get(10, TimeUnit.SECONDS);
                forcing.get(10, TimeUnit.SECONDS);

                Peers.await("both channels closed in round " + round, 5000,
                        () -> client.isClosed() && server.isClosed());
                clientSide.closed.get(5, TimeUnit.SECONDS);
                serverSide.closed.get(5, TimeUnit.SECONDS);
                Thread.sleep(20); // a second notice would come now
                String state = "round " + round + ": " + client.debugState() + " / " + server.debugState();
                assertEquals(1, clientSide.calls.get(), state);
                assertEquals(1, serverSide.calls.get(), state);
                assertTrue(clientSide.threads.get(0).contains("-cq"), clientSide.threads + " " + state);
                assertTrue(serverSide.threads.get(0).contains("-cq"), serverSide.threads + " " + state);
                assertEquals(clientBefore, client.movesOffLoop(), state);
                assertEquals(serverBefore, server.movesOffLoop(), state);
                listener.close();
            }
            Peers.await("queue pairs destroyed", 5000, () -> fabric.liveQueuePairs() == 0);
        } finally {
            fabric.close();
        }
        fabric.assertNoViolations();
    }

    /** The timer only asks: the loop tears an unfinished handshake down, and releases it. */
    @Test
    void aHandshakeDeadlineIsCarriedOutByTheLoop() throws Exception {
        FakeFabric fabric = new FakeFabric();
        TransportConfig serverConfig = TransportConfig.builder().sharedReceiveQueue(false).rnrRetryCount(0)
                .busyPollMicros(0).receiveSlots(8).slotSize(1024).handshakeTimeout(Duration.ofMillis(100)).build();
        try (RdmaTransport serverTransport = RdmaTransport.create(fabric, serverConfig);
             RdmaTransport clientTransport = RdmaTransport.create(fabric, TransportConfig.builder()
                     .sharedReceiveQueue(false).rnrRetryCount(0).busyPollMicros(0)
                     .connectTimeout(Duration.ofSeconds(2)).build())) {
            CompletableFuture<RdmaChannel> admitted = new CompletableFuture<>();
            Peers.Recorder serverSide = new Peers.Recorder();
            RdmaServer listener = serverTransport.listen(Peers.serverAddress(),
                    Peers.admitting(admitted::complete, serverSide));
            fabric.stallHandshakes(true);
            Thread stalled = Peers.stalledConnect(clientTransport, listener.localAddress());
            RdmaChannelImpl server = (RdmaChannelImpl) admitted.get(5, TimeUnit.SECONDS);
            Peers.await("the channel released at the deadline", 5000, server::isClosed);
            FabricException why = server.closeCause();
            assertNotNull(why);
            assertTrue(why.getMessage().contains("did not complete its handshake"), why.getMessage());
            assertEquals(0, server.movesOffLoop(), "the timer (or the accepting thread) moved the channel");
            assertFalse(serverSide.closed.isDone(), "never established: no handler, nothing to tell");
            stalled.join(5000);
            fabric.stallHandshakes(false);
        } finally {
            fabric.close();
        }
        fabric.assertNoViolations();
    }

    /**
     * Connections established one after the other while their loop is busy wait for it in its inbox, and are opened
     * (their application told) in the order they were established, not the inbox's last-in-first-out.
     */
    @Test
    void connectionsEstablishedWhileTheLoopIsBusyAreAcceptedInTheirOrder() throws Exception {
        try (HeldLoop held = new HeldLoop(true)) {
            for (int i = 0; i < 4; i++) {
                held.client.connect(held.listener.localAddress(), new Peers.Recorder());
            }
            Peers.await("four more requests admitted", 5000, () -> held.admitted.size() == 5);
            Thread.sleep(50);
            assertEquals(1, held.accepted.size(), "a handler was made off the busy loop");
            held.busy.release.countDown();
            Peers.await("all accepted", 5000, () -> held.accepted.size() == 5);
            assertEquals(held.admitted, held.accepted, "accepted out of the order they were established in");
        }
    }

    /**
     * Connect returned with the peer's accept while the client's loop is busy in a handler: the connecting caller
     * only asks (CONNECTED) and waits; the loop applies the peer's handshake and opens the channel once released, and
     * only then does connect return.
     */
    @Test
    void aConnectThatReturnedIsOpenedByTheLoop() throws Exception {
        try (HeldLoop held = new HeldLoop(false)) {
            CompletableFuture<RdmaChannel> connecting = CompletableFuture.supplyAsync(() -> {
                try {
                    return held.client.connect(held.listener.localAddress(), new Peers.Recorder());
                } catch (FabricException e) {
                    throw new AssertionError(e);
                }
            });
            Peers.await("the second accepted", 5000, () -> held.accepted.size() == 2);
            Thread.sleep(100);
            assertFalse(connecting.isDone(), "connect opened its channel without the (busy) loop");

            held.busy.release.countDown();
            RdmaChannelImpl second = (RdmaChannelImpl) connecting.get(10, TimeUnit.SECONDS);
            assertEquals(ChannelState.OPEN, second.state(), "connect returned before the loop opened the channel");
            assertEquals(0, second.movesOffLoop(), "the connecting thread moved the channel: " + second.debugState());
            assertEquals("CONNECTING>OPEN", second.path());
            second.write(ByteBuffer.wrap(new byte[] {2}), true); // the peer's handshake applied: frames flow
            Peers.await("the frame on the second connection", 5000, () -> second.stats().framesSent() == 1);
        }
    }

    /**
     * A connect the listener refuses while the client's loop is busy: the connecting caller asks its loop to tear the
     * channel down (SETUP_FAILED) and still throws the refusal on its own thread, after the release wait; the queue
     * pair it had is destroyed by the loop, once released, not by the caller.
     */
    @Test
    void aRefusedConnectIsTornDownByTheLoopAndThrowsOnTheCaller() throws Exception {
        try (HeldLoop held = new HeldLoop(false)) {
            RdmaServer refusing = held.server.listen(Peers.serverAddress(), Peers.refusing("not today"));
            int live = held.fabric.liveQueuePairs();

            FabricException refused = assertThrows(FabricException.class,
                    () -> held.client.connect(refusing.localAddress(), new Peers.Recorder()));
            assertTrue(refused.getMessage().contains("not today"), refused.getMessage());
            assertEquals(live + 1, held.fabric.liveQueuePairs(),
                    "the connecting thread destroyed the refused channel's queue pair itself");
            assertEquals(2, held.client.channelCount(), "the refused channel was released off its loop");

            held.busy.release.countDown();
            Peers.await("the refused channel released by its loop", 5000,
                    () -> held.fabric.liveQueuePairs() == live && held.client.channelCount() == 1);
        }
    }

    /**
     * An accept that fails after its channel was bound to a busy loop (the fabric refuses to hand over the queue
     * pair): the accepting thread asks the loop (SETUP_FAILED), which alone releases the channel once released; the
     * application never hears of it.
     */
    @Test
    void aFailedAcceptIsReleasedByTheLoop() throws Exception {
        try (HeldLoop held = new HeldLoop(true)) {
            held.fabric.beforeAcceptPrepare(qpn -> {
                throw new IllegalStateException("no queue pair for the test");
            });

            FabricException refused = assertThrows(FabricException.class,
                    () -> held.client.connect(held.listener.localAddress(), new Peers.Recorder()));
            assertTrue(refused.getMessage().contains("no queue pair for the test"), refused.getMessage());
            RdmaChannelImpl failed = (RdmaChannelImpl) held.admitted.get(1);
            Peers.await("the failure asked of the busy loop", 5000, failed::commandsPending);
            Thread.sleep(50);
            assertEquals(ChannelState.CONNECTING, failed.state(), "a thread other than the loop moved the channel");

            held.busy.release.countDown();
            Peers.await("the failed channel released", 5000, failed::isClosed);
            assertTrue(failed.closeCause().getMessage().contains("accepting the connection from"),
                    failed.closeCause().getMessage());
            assertEquals(0, failed.movesOffLoop(), "the accepting thread moved the channel: " + failed.debugState());
            assertEquals(1, held.accepted.size(), "the application heard of the failed accept");
            Peers.await("only the first connection left", 5000, () -> held.server.channelCount() == 1);
        }
    }

    private static void await(CountDownLatch go) {
        try {
            go.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
