package dev.artemisrdma.transport.channel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import dev.artemisrdma.transport.Connection;
import dev.artemisrdma.transport.FakeFabric;
import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.WcStatus;

/**
 * Issue 39, second slice: the close as a state machine ({@link ChannelState}). The table's first half is the states
 * themselves (what each waits for, its one deadline, moves that only go forward); its second half is the real
 * {@link ChannelLifecycle} on the in-memory fabric: each row drives a channel by one event from one state and checks
 * the path it took ({@link RdmaChannelImpl#path}, every state it was in, in order) and how it ended (the cause its
 * handler was told). Together the rows visit every state, which the last check asserts.
 */
class ChannelStateTest {

    /** The states the rows below visited, on the real lifecycle. */
    private static final Set<ChannelState> VISITED = ConcurrentHashMap.newKeySet();

    private static TransportConfig config() {
        return config(Duration.ofSeconds(2), Duration.ofSeconds(10));
    }

    private static TransportConfig config(Duration closeTimeout, Duration handshakeTimeout) {
        return TransportConfig.builder().sharedReceiveQueue(false).rnrRetryCount(0).busyPollMicros(0).receiveSlots(8)
                .slotSize(1024).closeTimeout(closeTimeout).handshakeTimeout(handshakeTimeout)
                .connectTimeout(Duration.ofSeconds(5)).build();
    }

    // ---------------------------------------------------------------------------------------------- the states

    @Test
    void everyStateNamesWhatItWaitsForAndHoldsOneDeadline() {
        Map<ChannelState, ChannelState.Deadline> deadlines = Map.of(
                ChannelState.CONNECTING, ChannelState.Deadline.NONE,
                ChannelState.CONNECTING_CLOSE_ASKED, ChannelState.Deadline.CLOSE,
                ChannelState.OPEN, ChannelState.Deadline.NONE,
                ChannelState.FLUSHING, ChannelState.Deadline.CLOSE,
                ChannelState.GOODBYE_SENT, ChannelState.Deadline.CLOSE,
                ChannelState.FLUSHED_AWAITING_EVENT, ChannelState.Deadline.FLUSH_GRACE,
                ChannelState.DRAINING, ChannelState.Deadline.DRAIN,
                ChannelState.PEER_DRAINING, ChannelState.Deadline.DRAIN,
                ChannelState.RELEASING, ChannelState.Deadline.NONE,
                ChannelState.CLOSED, ChannelState.Deadline.NONE);
        assertEquals(EnumSet.allOf(ChannelState.class), deadlines.keySet());
        for (ChannelState s : ChannelState.values()) {
            assertFalse(s.waitsFor().isBlank(), s + " says what it waits for");
            assertEquals(deadlines.get(s), s.deadline(), s + "'s deadline");
        }
    }

    /**
     * Every move goes to a later state: a channel never goes back (a closing one never reopens, a draining one never
     * sends), which is also what makes the set of states it was in its path. Every state is reachable from
     * CONNECTING, and every one but CLOSED leads on.
     */
    @Test
    void movesOnlyGoForwardAndEveryStateIsOnAPathToClosed() {
        Set<ChannelState> reachable = EnumSet.of(ChannelState.CONNECTING);
        for (ChannelState from : ChannelState.values()) {
            boolean leadsOn = false;
            for (ChannelState to : ChannelState.values()) {
                if (from.canMoveTo(to)) {
                    assertTrue(to.compareTo(from) > 0, from + " -> " + to + " goes back");
                    assertFalse(from.tearingDown() && to.sends(), from + " -> " + to + " sends again");
                    if (reachable.contains(from)) {
                        reachable.add(to);
                    }
                    leadsOn = true;
                }
            }
            assertEquals(from != ChannelState.CLOSED, leadsOn, from + " leads on");
        }
        assertEquals(EnumSet.allOf(ChannelState.class), reachable);
        assertEquals("CONNECTING>OPEN>FLUSHING>CLOSED", ChannelState.path(ChannelState.CONNECTING.bit()
                | ChannelState.OPEN.bit() | ChannelState.FLUSHING.bit() | ChannelState.CLOSED.bit()));
    }

    // ---------------------------------------------------------------------------- the real lifecycle, by event

    /** How a channel ended: the path it took, and the cause its handler was told (null: a clean local close). */
    private record Ended(String path, FabricException told) {
    }

    @FunctionalInterface
    private interface Row {
        Ended drive() throws Exception;
    }

    /** One row: from a state, an event; the path the real lifecycle takes; what the cause must say. */
    private record Transition(String event, Row row, String path, String causeSays) {
        @Override
        public String toString() {
            return event;
        }
    }

    static Stream<Transition> transitions() {
        return Stream.of(
                new Transition("OPEN, close(): the frames, the goodbye once the outbox is empty, the drain",
                        ChannelStateTest::closeWhenOpen, "CONNECTING>OPEN>FLUSHING>GOODBYE_SENT>DRAINING>CLOSED",
                        null),
                new Transition("OPEN, forceClose(): the drain at once", ChannelStateTest::forceCloseWhenOpen,
                        "CONNECTING>OPEN>DRAINING>CLOSED", null),
                new Transition("OPEN, a failed completion: the drain, with the status as the cause",
                        ChannelStateTest::failedCompletionWhenOpen, "CONNECTING>OPEN>DRAINING>CLOSED",
                        "IBV_WC_RETRY_EXC_ERR"),
                new Transition("OPEN, the peer's DISCONNECTED before its flushes, no goodbye: lost",
                        () -> peerDisconnectsFirst(false), "CONNECTING>OPEN>PEER_DRAINING>CLOSED",
                        "lost: peer disconnected"),
                new Transition("OPEN, the peer's DISCONNECTED before its flushes, after its goodbye: closed",
                        () -> peerDisconnectsFirst(true), "CONNECTING>OPEN>PEER_DRAINING>CLOSED",
                        "closed the connection"),
                new Transition("OPEN, flushes and no DISCONNECTED within 200 ms: closed with the flushes' cause",
                        ChannelStateTest::flushesWithoutTheEvent, "CONNECTING>OPEN>FLUSHED_AWAITING_EVENT>CLOSED",
                        "work requests flushed"),
                new Transition("FLUSHED_AWAITING_EVENT, then DISCONNECTED: its reason replaces the flushes'",
                        () -> flushesThenTheEvent(false),
                        "CONNECTING>OPEN>FLUSHED_AWAITING_EVENT>PEER_DRAINING>CLOSED", "lost: peer disconnected"),
                new Transition("FLUSHED_AWAITING_EVENT of a close asked while CONNECTING, then DISCONNECTED: "
                        + "the event answers our close", () -> flushesThenTheEvent(true),
                        "CONNECTING>CONNECTING_CLOSE_ASKED>FLUSHED_AWAITING_EVENT>PEER_DRAINING>CLOSED", null),
                new Transition("CONNECTING, close(), then ESTABLISHED: the close goes on",
                        ChannelStateTest::closeWhileConnectingThenEstablished,
                        "CONNECTING>CONNECTING_CLOSE_ASKED>FLUSHING>GOODBYE_SENT>DRAINING>CLOSED", null),
                new Transition("CONNECTING, close(), never established: the drain at closeTimeout",
                        ChannelStateTest::closeWhileConnectingNeverEstablished,
                        "CONNECTING>CONNECTING_CLOSE_ASKED>DRAINING>CLOSED", null),
                new Transition("CONNECTING, the handshake deadline: released by the loop",
                        ChannelStateTest::handshakeDeadline, "CONNECTING>RELEASING>CLOSED",
                        "did not complete its handshake"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("transitions")
    void theLifecycleTakesThePathOfTheTable(Transition t) throws Exception {
        Ended ended = t.row().drive();
        assertEquals(t.path(), ended.path(), t.event());
        if (t.causeSays() == null) {
            assertNull(ended.told(), t.event() + ": a clean local close has no cause");
        } else {
            assertNotNull(ended.told(), t.event());
            assertTrue(ended.told().getMessage().contains(t.causeSays()), ended.told().getMessage());
        }
        for (String s : ended.path().split(">")) {
            VISITED.add(ChannelState.valueOf(s));
        }
    }

    /** Runs after the rows: together they visited every state of the real lifecycle. */
    @AfterAll
    static void theRowsVisitedEveryState() {
        if (!VISITED.isEmpty()) { // the rows ran (not a run of the other tests alone)
            assertEquals(EnumSet.allOf(ChannelState.class), EnumSet.copyOf(VISITED));
        }
    }

    private static Ended ended(RdmaChannel channel, Peers.Recorder handler) throws Exception {
        RdmaChannelImpl c = (RdmaChannelImpl) channel;
        Peers.await("closed", 5000, c::isClosed);
        return new Ended(c.path(), handler.closed.get(5, TimeUnit.SECONDS));
    }

    private static Ended closeWhenOpen() throws Exception {
        Peers.Recorder clientSide = new Peers.Recorder();
        Peers.Recorder serverSide = new Peers.Recorder();
        try (Connection c = new Connection(new FakeFabric(), config(), config(), serverSide, clientSide)) {
            c.client.write(ByteBuffer.wrap(new byte[] {1, 2, 3}), true);
            Peers.await("the frame", 5000, () -> serverSide.count() == 1);
            c.client.close();
            return ended(c.client, clientSide);
        }
    }

    private static Ended forceCloseWhenOpen() throws Exception {
        Peers.Recorder clientSide = new Peers.Recorder();
        try (Connection c = new Connection(new FakeFabric(), config(), config(), new Peers.Recorder(), clientSide)) {
            c.client.forceClose();
            return ended(c.client, clientSide);
        }
    }

    private static Ended failedCompletionWhenOpen() throws Exception {
        Peers.Recorder clientSide = new Peers.Recorder();
        try (Connection c = new Connection(new FakeFabric(), config(), config(), new Peers.Recorder(), clientSide)) {
            c.fabric.injectSendErrors(WcStatus.RETRY_EXC_ERR, 1);
            for (int i = 0; i < 5 && c.client.isOpen(); i++) {
                try {
                    c.client.write(ByteBuffer.wrap(new byte[100]), true);
                } catch (FabricException closedAlready) {
                    break;
                }
            }
            return ended(c.client, clientSide);
        }
    }

    /**
     * The server's loop is held in its handler while the client closes (or forces) its side: rdma_cm's DISCONNECTED
     * waits as a request for the loop, which runs it ahead of the flushes it polls next.
     */
    private static Ended peerDisconnectsFirst(boolean goodbye) throws Exception {
        Peers.HoldingRecorder serverSide = new Peers.HoldingRecorder();
        try (Connection c = new Connection(new FakeFabric(), config(), config(), serverSide, new Peers.Recorder())) {
            RdmaChannelImpl server = (RdmaChannelImpl) c.serverChannel;
            c.client.write(ByteBuffer.wrap(new byte[] {1}), true);
            assertTrue(serverSide.inHandler.await(5, TimeUnit.SECONDS));
            if (goodbye) {
                c.client.close();
            } else {
                c.client.forceClose();
            }
            Peers.await("DISCONNECTED waiting for the server's loop", 5000, server::commandsPending);
            assertEquals(ChannelState.OPEN, server.state(), "the event thread moved the channel");
            serverSide.release.countDown();
            return ended(server, serverSide);
        }
    }

    /** rdma_cm's thread is held: the server's queue pair flushes, and its DISCONNECTED never comes in time. */
    private static Ended flushesWithoutTheEvent() throws Exception {
        Peers.Recorder serverSide = new Peers.Recorder();
        FakeFabric fabric = new FakeFabric();
        try (Connection c = new Connection(fabric, config(), config(), serverSide, new Peers.Recorder())) {
            CountDownLatch events = fabric.holdEvents();
            try {
                c.client.forceClose();
                return ended(c.serverChannel, serverSide);
            } finally {
                events.countDown();
            }
        }
    }

    /**
     * Three connections on one server loop. C's handler holds the loop while A's peer forces its side shut (rdma_cm's
     * thread held, so A's queue pair only flushes) and B's peer writes: A's flushes and B's frame wait in the loop's
     * queue, and come in one batch, in which B's handler holds the loop again. A's DISCONNECTED, let go meanwhile,
     * waits in A's mailbox: the batch's end moves A to FLUSHED_AWAITING_EVENT, and the loop runs the event before
     * anything else of A's, within the grace however long the holds took. {@code closeFirst}: A's ESTABLISHED is held
     * back and A closed before (B and C open on their first frames), so the event answers that close.
     */
    private static Ended flushesThenTheEvent(boolean closeFirst) throws Exception {
        FakeFabric fabric = new FakeFabric();
        fabric.holdPassiveEstablished(closeFirst);
        TransportConfig oneLoop = TransportConfig.builder().sharedReceiveQueue(false).rnrRetryCount(0)
                .busyPollMicros(0).receiveSlots(8).slotSize(1024).maxCompletionLoops(1)
                .closeTimeout(Duration.ofSeconds(5)).handshakeTimeout(Duration.ofSeconds(10)).build();
        Peers.Recorder a = new Peers.Recorder();
        Peers.HoldingRecorder b = new Peers.HoldingRecorder();
        Peers.HoldingRecorder c = new Peers.HoldingRecorder();
        List<Peers.Recorder> handlers = List.of(a, b, c);
        List<RdmaChannel> admitted = new CopyOnWriteArrayList<>();
        try (RdmaTransport serverTransport = RdmaTransport.create(fabric, oneLoop);
             RdmaTransport clientTransport = RdmaTransport.create(fabric, config())) {
            RdmaServer listener = serverTransport.listen(Peers.serverAddress(),
                    Peers.admittingEach(admitted::add, channel -> handlers.get(admitted.indexOf(channel))));
            RdmaChannel[] clients = new RdmaChannel[3];
            for (int i = 0; i < 3; i++) {
                clients[i] = clientTransport.connect(listener.localAddress(), new Peers.Recorder());
                int n = i + 1;
                Peers.await("server channel " + n + " admitted and open", 5000,
                        () -> admitted.size() == n && (closeFirst || ChannelHooks.established(admitted.get(n - 1))));
            }
            RdmaChannelImpl server = (RdmaChannelImpl) admitted.get(0);
            CompletableFuture<Void> closing = CompletableFuture.completedFuture(null);
            if (closeFirst) {
                closing = CompletableFuture.runAsync(server::close);
                Peers.await("A's close asked", 5000, () -> server.state() == ChannelState.CONNECTING_CLOSE_ASKED);
            }
            clients[2].write(ByteBuffer.wrap(new byte[] {3}), true);
            assertTrue(c.inHandler.await(5, TimeUnit.SECONDS), "C holds the server's loop");
            CountDownLatch events = fabric.holdEvents();
            try {
                clients[0].forceClose();
                clients[1].write(ByteBuffer.wrap(new byte[] {2}), true);
                c.release.countDown();
                assertTrue(b.inHandler.await(5, TimeUnit.SECONDS), "B holds the server's loop");
            } finally {
                events.countDown();
            }
            Peers.await("A's DISCONNECTED waiting for the loop", 5000, server::commandsPending);
            b.release.countDown();
            if (!closeFirst) {
                return ended(server, a);
            }
            closing.get(10, TimeUnit.SECONDS);
            Peers.await("closed", 5000, server::isClosed);
            assertFalse(a.closed.isDone(), "a handler never made was told");
            return new Ended(server.path(), server.closeCause());
        } finally {
            fabric.close();
            fabric.assertNoViolations();
        }
    }

    /** rdma_cm's ESTABLISHED is held back on the server, which closes its channel meanwhile; then it comes. */
    private static Ended closeWhileConnectingThenEstablished() throws Exception {
        FakeFabric fabric = new FakeFabric();
        fabric.holdPassiveEstablished(true);
        Peers.Recorder serverSide = new Peers.Recorder();
        try (Connection c = new Connection(fabric, config(), config(), serverSide, new Peers.Recorder())) {
            RdmaChannelImpl server = (RdmaChannelImpl) c.serverChannel;
            assertEquals(ChannelState.CONNECTING, server.state());
            CompletableFuture<Void> closing = CompletableFuture.runAsync(server::close);
            Peers.await("the close asked", 5000, () -> server.state() == ChannelState.CONNECTING_CLOSE_ASKED);
            assertEquals(1, fabric.deliverHeldEstablished());
            closing.get(10, TimeUnit.SECONDS);
            return ended(server, serverSide);
        }
    }

    /** As above, but ESTABLISHED never comes: the close's deadline (closeTimeout) disconnects the queue pair. */
    private static Ended closeWhileConnectingNeverEstablished() throws Exception {
        return neverEstablished(config(Duration.ofMillis(200), Duration.ofSeconds(10)), RdmaChannel::close);
    }

    /**
     * ESTABLISHED never comes, nor a frame: the timer asks, the loop tears the channel down and releases it. On the
     * shared receive pool: the queue pair, never established for the channel, is destroyed at once, and one with
     * receives of its own still posted would break the fake fabric's rule that none is left at its destroy.
     */
    private static Ended handshakeDeadline() throws Exception {
        TransportConfig shared = TransportConfig.builder().rnrRetryCount(0).busyPollMicros(0)
                .handshakeTimeout(Duration.ofMillis(100)).build();
        return neverEstablished(shared, server -> { });
    }

    /**
     * A server channel whose rdma_cm ESTABLISHED is held back for good: {@code act} on it, then how it ended. No
     * handler was made for it, so none is told: the cause is the channel's own.
     */
    private static Ended neverEstablished(TransportConfig serverConfig, Consumer<RdmaChannel> act) throws Exception {
        FakeFabric fabric = new FakeFabric();
        fabric.holdPassiveEstablished(true);
        Peers.Recorder serverSide = new Peers.Recorder();
        try (Connection c = new Connection(fabric, serverConfig, config(), serverSide, new Peers.Recorder())) {
            RdmaChannelImpl server = (RdmaChannelImpl) c.serverChannel;
            act.accept(server);
            Peers.await("closed", 5000, server::isClosed);
            assertFalse(serverSide.closed.isDone(), "a handler never made was told");
            return new Ended(server.path(), server.closeCause());
        }
    }
}
