package dev.artemisrdma.transport.channel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.Connection;
import dev.artemisrdma.transport.FakeFabric;
import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.stats.ChannelGroupStats;
import dev.artemisrdma.transport.stats.TransportStats;

/**
 * Monitoring and the tests read a channel without its lock (issue 39, slice 5): a scrape (metrics, JMX,
 * {@link ChannelGroupStats}) never waits for the completion loop or a writer. Each test holds the server channel's
 * loop in its handler and the channels' locks on this thread, then calls every reader on another thread: each must
 * answer, with the channel's values, while both are held. A reader that takes the lock again hangs until the lock is
 * let go, which the bounded wait reports (5 s: a bound on a hang, not a timing).
 */
class MonitoringReadersTest {

    private static final long HANG_SECONDS = 5;

    private static TransportConfig serverConfig() {
        return TransportConfig.builder().sharedReceiveQueue(true).rnrRetryCount(0).busyPollMicros(0).receiveSlots(8)
                .slotSize(1024).closeTimeout(Duration.ofSeconds(2)).build();
    }

    private static TransportConfig clientConfig() {
        return TransportConfig.builder().sharedReceiveQueue(false).rnrRetryCount(0).busyPollMicros(0).receiveSlots(8)
                .slotSize(1024).closeTimeout(Duration.ofSeconds(2)).build();
    }

    /** What the readers answered, read together on a thread that does not hold the locks. */
    private record Readings(TransportStats stats, long registeredBytes, Object sharedPool, boolean olderPeer,
                            FabricException closeCause, int movesOffLoop, boolean drainTimedOut, int receives,
                            ChannelState state, String path, String debugState, ChannelGroupStats.Snapshot group) {

        static Readings of(RdmaChannelImpl channel) {
            ChannelGroupStats group = new ChannelGroupStats();
            group.add(channel);
            return new Readings(channel.stats(), channel.registeredBytes(), channel.sharedPool(),
                    channel.olderPeer(), channel.closeCause(), channel.movesOffLoop(), channel.drainTimedOut(),
                    channel.receivesPostedOrAwaitingRepost(), channel.state(), channel.path(), channel.debugState(),
                    group.snapshot());
        }
    }

    /**
     * Calls {@code read} on another thread while this one holds {@code locks}: the answer, or a failure naming the
     * reader that waited for a lock.
     */
    private static <T> T readWhileHeld(Supplier<T> read, ReentrantLock... locks) throws Exception {
        for (ReentrantLock l : locks) {
            l.lock();
        }
        try {
            CompletableFuture<T> answer = CompletableFuture.supplyAsync(read);
            try {
                return answer.get(HANG_SECONDS, TimeUnit.SECONDS);
            } catch (TimeoutException e) {
                fail("a monitoring reader waited for the channel's lock (no answer within " + HANG_SECONDS + " s)");
                return null;
            }
        } finally {
            for (ReentrantLock l : locks) {
                l.unlock();
            }
        }
    }

    @Test
    void readersOfAnOpenChannelAnswerWhileItsLoopAndLockAreHeld() throws Exception {
        Peers.HoldingRecorder serverSide = new Peers.HoldingRecorder();
        try (Connection c = new Connection(new FakeFabric(), serverConfig(), clientConfig(), serverSide,
                new Peers.Recorder())) {
            RdmaChannelImpl server = (RdmaChannelImpl) c.serverChannel;
            RdmaChannelImpl client = (RdmaChannelImpl) c.client;
            c.client.write(ByteBuffer.wrap(new byte[] {1, 2, 3}), true);
            assertTrue(serverSide.inHandler.await(5, TimeUnit.SECONDS), "the server's loop busy in its handler");
            assertNotNull(server.sharedPool(), "the accepted channel takes its receives from its loop's pool");

            Readings s = readWhileHeld(() -> Readings.of(server), server.lockForTests(), client.lockForTests());
            assertEquals(1, s.stats().framesReceived());
            assertEquals(3, s.stats().bytesReceived());
            assertTrue(s.registeredBytes() > 0, "the send headers' registration");
            assertNotNull(s.sharedPool());
            assertFalse(s.olderPeer());
            assertNull(s.closeCause());
            assertEquals(0, s.movesOffLoop());
            assertFalse(s.drainTimedOut());
            assertEquals(0, s.receives(), "a channel on the shared pool posts no receives of its own");
            assertEquals(ChannelState.OPEN, s.state());
            assertEquals("CONNECTING>OPEN", s.path());
            assertTrue(s.debugState().contains(" OPEN ") && s.debugState().contains("shared="), s.debugState());
            assertEquals(1, s.group().connections());
            assertEquals(1, s.group().framesReceived());
            assertEquals(s.registeredBytes() + server.sharedPool().registeredBytes(), s.group().registeredBytes(),
                    "the channel's registration and its pool's, once");

            Readings k = readWhileHeld(() -> Readings.of(client), server.lockForTests(), client.lockForTests());
            assertEquals(1, k.stats().framesSent());
            assertNull(k.sharedPool());
            assertEquals(clientConfig().postedReceives(), k.receives(), "every receive slot posted, none consumed");
            assertTrue(k.debugState().contains("own receives"), k.debugState());
            serverSide.release.countDown(); // before the close, which would wait for the held loop
        } finally {
            serverSide.release.countDown();
        }
    }

    /** What the teardown decided is published before CLOSED: a reader that saw CLOSED sees the cause and the release. */
    @Test
    void readersOfAClosedChannelAnswerWhileItsLockIsHeld() throws Exception {
        try (Connection c = new Connection(new FakeFabric(), serverConfig(), clientConfig())) {
            RdmaChannelImpl server = (RdmaChannelImpl) c.serverChannel;
            RdmaChannelImpl client = (RdmaChannelImpl) c.client;
            c.client.write(ByteBuffer.wrap(new byte[] {1}), true);
            Peers.await("the frame", 5000, () -> c.serverSide.count() == 1);
            c.client.close();
            Peers.await("the server's channel closed", 5000, server::isClosed);

            Readings s = readWhileHeld(() -> Readings.of(server), server.lockForTests(), client.lockForTests());
            assertEquals(ChannelState.CLOSED, s.state());
            assertNotNull(s.closeCause(), "the peer's close is the server channel's cause");
            assertTrue(s.closeCause().getMessage().contains("closed the connection"), s.closeCause().getMessage());
            assertFalse(s.drainTimedOut());
            assertEquals(0, s.registeredBytes(), "released");
            assertNull(s.sharedPool(), "its credits went back to the pool");
            assertEquals(0, s.movesOffLoop());
            assertTrue(s.path().endsWith(">CLOSED"), s.path());

            Readings k = readWhileHeld(() -> Readings.of(client), server.lockForTests(), client.lockForTests());
            assertNull(k.closeCause(), "a clean local close has no cause");
            assertEquals(0, k.receives(), "the queue pair is destroyed: no receive is posted or waits");
            assertEquals(0, k.registeredBytes());
        }
    }
}
