package dev.artemisrdma.transport.loop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.Connection;
import dev.artemisrdma.transport.FakeFabric;
import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.TransportHooks;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.channel.ChannelHooks;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.stats.TransportStats;

/**
 * A writer on another thread that flushes while the channel's completion loop handles a batch leaves the post to
 * the loop, which posts everything queued on the channel as one list after the batch; a loop that is blocked never
 * delays a write.
 */
class LoopPostedWritesTest {

    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    private static TransportConfig strict() {
        return TransportConfig.builder().rnrRetryCount(0).busyPollMicros(0).build();
    }

    @Test
    void writesFlushedWhileTheLoopHandlesABatchLeaveAsOneListAfterIt() throws Exception {
        Peers.HoldingRecorder serverSide = new Peers.HoldingRecorder();
        Peers.Recorder clientSide = new Peers.Recorder();
        try (Connection c = new Connection(new FakeFabric(), strict(), strict(), serverSide, clientSide)) {
            RdmaChannel ch = c.client;
            RdmaChannel served = c.serverChannel;
            ch.write(ByteBuffer.wrap(Peers.payload(7, 0, 100)), true);
            assertTrue(serverSide.inHandler.await(5, TimeUnit.SECONDS), "the server's loop is in the handler");
            long postsBefore = served.stats().postCalls();
            for (int i = 0; i < 10; i++) {
                served.write(ByteBuffer.wrap(Peers.payload(8, i, 300)), true); // the test thread, not the loop
            }
            TransportStats held = served.stats();
            assertEquals(postsBefore, held.postCalls(), "nothing posted while the loop handles its batch: " + held);
            assertEquals(10, held.flushesToLoop(), held.toString());
            assertEquals(0, clientSide.count());
            serverSide.release.countDown();
            Peers.await("the ten frames", 5000, () -> clientSide.count() == 10);
            for (int i = 0; i < 10; i++) {
                assertEquals(Peers.crc(Peers.payload(8, i, 300)), clientSide.crcs.get(i), "frame " + i);
            }
            // the fake delivers inside the post, so the peer can see the frames before the loop counts its post
            Peers.await("the loop's post counted", 5000, () -> served.stats().postCalls() > postsBefore);
            TransportStats after = served.stats();
            assertEquals(postsBefore + 1, after.postCalls(), "the loop posted the ten writes as one list: " + after);
            assertEquals(10, after.framesPacked(), after.toString());
        }
    }

    @Test
    void aFlushLeftToTheLoopIsTheChannelsOwnRequestQueuedOnceAndAllocatesNothing() throws Exception {
        // the hand-off took a queue node per flush left to the loop; the channel's one FlushRequest is queued at most
        // once, and a writer that finds it queued leaves its frames to the post it stands for
        Peers.HoldingRecorder serverSide = new Peers.HoldingRecorder();
        try (Connection c = new Connection(new FakeFabric(), strict(), strict(), serverSide, new Peers.Recorder())) {
            RdmaChannel served = c.serverChannel;
            FlushRequest request = ChannelHooks.flushRequest(served);
            CompletionLoop loop = TransportHooks.loops(c.serverTransport, c.fabric.device()).get(0);
            c.client.write(ByteBuffer.wrap(Peers.payload(7, 0, 100)), true);
            assertTrue(serverSide.inHandler.await(5, TimeUnit.SECONDS), "the server's loop is in the handler");
            served.write(ByteBuffer.wrap(Peers.payload(8, 0, 300)), true);
            assertTrue(request.queued.get(), "the writer left its flush to the loop: " + served.stats());

            long before = THREADS.getThreadAllocatedBytes(Thread.currentThread().getId());
            for (int i = 0; i < 100_000; i++) {
                assertTrue(loop.takeFlush(request)); // queued already: the loop posts for it after its batch
            }
            long bytes = THREADS.getThreadAllocatedBytes(Thread.currentThread().getId()) - before;
            assertTrue(bytes < 1024, "100,000 hand-offs allocated " + bytes + " bytes on the writer's thread");
            assertEquals(null, request.next, "queued once: nothing behind it");

            serverSide.release.countDown();
            Peers.await("the loop's post for the writer", 5000, () -> c.clientSide.count() == 1);
            Peers.await("the request's mark cleared", 5000, () -> !request.queued.get());
            assertEquals(1, served.stats().flushesToLoop(), served.stats().toString());
        }
    }

    @Test
    void aWriteToAChannelWhoseLoopIsBlockedIsPostedAtOnce() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            CompletionLoop loop = TransportHooks.loops(c.serverTransport, c.fabric.device()).get(0);
            Peers.await("the server's loop idle", 10_000, loop::isBlockedIdle);
            long posts = c.serverChannel.stats().postCalls();
            c.serverChannel.write(ByteBuffer.wrap(Peers.payload(9, 0, 64)), true);
            TransportStats s = c.serverChannel.stats();
            assertEquals(posts + 1, s.postCalls(), "posted by the writer itself: " + s);
            assertEquals(0, s.flushesToLoop(), s.toString());
            Peers.await("the frame", 5000, () -> c.clientSide.count() == 1);
        }
    }

    @Test
    void aWriterRacingABusyLoopLosesNoFrameAndKeepsItsOrder() throws Exception {
        // the client streams to the server so that the server's loop keeps handling batches, while a thread of the
        // test writes to the client on the same channel, flushing each frame: every flush races the loop's batches
        try (Connection c = new Connection(strict(), strict())) {
            int total = 20_000;
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Thread streamer = new Thread(() -> {
                try {
                    for (int i = 0; i < total; i++) {
                        c.client.write(ByteBuffer.wrap(Peers.payload(10, i, 64)), i % 8 == 7 || i == total - 1);
                    }
                } catch (Throwable e) {
                    failed.set(e);
                }
            });
            streamer.start();
            for (int i = 0; i < total; i++) {
                c.serverChannel.write(ByteBuffer.wrap(Peers.payload(11, i, 64)), true);
            }
            streamer.join(30_000);
            assertEquals(null, failed.get());
            Peers.await("every frame to the server", 30_000, () -> c.serverSide.count() == total);
            Peers.await("every frame to the client", 30_000, () -> c.clientSide.count() == total);
            for (int i = 0; i < total; i++) {
                assertEquals(Peers.crc(Peers.payload(11, i, 64)), c.clientSide.crcs.get(i), "frame " + i);
            }
            TransportStats s = c.serverChannel.stats();
            System.out.printf("loop-posted writes: %d of %d flushes left to the loop, %d post calls%n",
                    s.flushesToLoop(), total, s.postCalls());
        }
    }
}
