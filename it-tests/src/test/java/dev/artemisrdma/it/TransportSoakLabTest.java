package dev.artemisrdma.it;

import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.api.SendBuffer;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.stats.TransportStats;
import dev.artemisrdma.transport.verbs.VerbsFabric;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.ByteBuffer;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.Callable;
import java.util.concurrent.locks.LockSupport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The transport soak: {@code -Dsoak.frames} frames (CI 250,000; it-tests/bench/lab-soaks runs 1,000,000) over one
 * connection of the real rxe fabric, half each way, both directions at once, with rnr_retry_count = 0 on both sides, so
 * that a single credit mistake (a SEND into a receive that was not posted) fails the queue pair instead of hiding
 * behind a retry ({@link #soak} runs the same over siw for SiwLabTest). Sizes and contents come from {@link SoakMix}
 * (95 % 1 B..2 KiB, the rest log-uniform up to 1 MiB, three frames of 16 MiB each way); every frame is checked on
 * arrival against its sequence number. Afterwards rxe's hardware RNR counters must not have moved, and our own counters
 * must account for every frame and byte, with rxe's packet counter showing the bytes went over RDMA.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
public class TransportSoakLabTest {

    private static final long FRAMES = Long.getLong("soak.frames", 250_000);
    private static final int GIANTS_EACH_WAY = 3;
    /** A frame's flush waits for this many more writes (frames leave in lists, small ones packed). */
    private static final int FLUSH_EVERY = 16;
    /** No frame delivered for this long (either way) fails the test, saying where each direction stood. */
    private static final long STALL_NANOS = TimeUnit.SECONDS.toNanos(60);

    /** Checks every frame in order against the mix; remembers the first mismatch (and then stops checking). */
    private static final class Checker implements ChannelHandler {
        final SoakMix mix;
        final AtomicReference<String> mismatch = new AtomicReference<>();
        final AtomicReference<FabricException> closedCause = new AtomicReference<>();
        volatile Thread writer;
        volatile long frames;
        volatile long bytes;
        volatile long doneAt;
        volatile boolean closed;

        Checker(SoakMix mix) {
            this.mix = mix;
        }

        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            long seq = frames;
            if (mismatch.get() == null) {
                String problem = seq >= mix.count() ? "frame " + seq + " beyond the " + mix.count() + " sent"
                        : mix.check(frame, seq);
                if (problem != null) {
                    mismatch.compareAndSet(null, problem);
                }
            }
            bytes += frame.remaining();
            frames = seq + 1;
            if (seq + 1 == mix.count()) {
                doneAt = System.nanoTime();
            }
        }

        @Override
        public void onWritable(RdmaChannel channel) {
            Thread t = writer;
            if (t != null) {
                LockSupport.unpark(t);
            }
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
            closedCause.set(cause);
            closed = true;
        }
    }

    /** Writes the mix's frames in order: even ones encoded into registered memory, odd ones copied in. */
    private static void writeAll(RdmaChannel channel, Checker ownHandler, SoakMix mix) throws FabricException {
        ownHandler.writer = Thread.currentThread();
        ByteBuffer scratch = ByteBuffer.allocate(SoakMix.GIANT);
        for (long seq = 0; seq < mix.count(); seq++) {
            while (!channel.isWritable()) {
                channel.flush();
                if (!channel.isOpen()) {
                    throw new FabricException("channel closed while writing frame " + seq);
                }
                LockSupport.parkNanos(1_000_000);
            }
            boolean flush = seq % FLUSH_EVERY == FLUSH_EVERY - 1 || seq == mix.count() - 1;
            if (seq % 2 == 0) {
                SendBuffer buffer = channel.allocate(mix.size(seq));
                mix.fill(buffer.buffer(), seq);
                channel.write(buffer, flush);
            } else {
                scratch.clear();
                mix.fill(scratch, seq);
                channel.write(scratch.flip(), flush);
            }
        }
    }

    public static TransportConfig strict() {
        return TransportConfig.defaults().toBuilder().rnrRetryCount(0).retryCount(7).build();
    }

    /**
     * One soak of {@code frames} frames over the lab's real fabric (rxe or siw), the channel listening on
     * {@code address}:{@code port}: every frame checked in order, both sides' counters accounting for every frame
     * and byte.
     * {@code fabricCounters} is read once the connection is up and again before it closes, so that the caller can
     * prove from the fabric's own counters that the traffic went over RDMA.
     */
    public static <C> Outcome<C> soak(TransportConfig config, String address, int port, long frames,
                                      Callable<C> fabricCounters) throws Exception {
        long each = frames / 2;
        SoakMix toServer = new SoakMix(101, each, GIANTS_EACH_WAY);
        SoakMix toClient = new SoakMix(202, each, GIANTS_EACH_WAY);
        long bytesToServer = toServer.totalBytes();
        long bytesToClient = toClient.totalBytes();
        Checker atServer = new Checker(toServer);
        Checker atClient = new Checker(toClient);
        try (VerbsFabric fabric = new VerbsFabric();
             RdmaTransport serverTransport = RdmaTransport.create(fabric, config);
             RdmaTransport clientTransport = RdmaTransport.create(fabric, config)) {
            CompletableFuture<RdmaChannel> accepted = new CompletableFuture<>();
            RdmaServer server = serverTransport.listen(Lab.address(address, port), channel -> {
                accepted.complete(channel);
                return atServer;
            });
            RdmaChannel client = clientTransport.connect(server.localAddress(), atClient);
            RdmaChannel serverChannel = accepted.get(30, TimeUnit.SECONDS);

            C before = fabricCounters.call();
            long start = System.nanoTime();
            CompletableFuture<Long> up = writer("soak-client-writer", client, atClient, toServer);
            CompletableFuture<Long> down = writer("soak-server-writer", serverChannel, atServer, toClient);
            awaitAll(atServer, atClient, up, down, each);
            long end = System.nanoTime();
            up.join();
            down.join();
            C after = fabricCounters.call();

            assertNull(atServer.mismatch.get(), "client to server");
            assertNull(atClient.mismatch.get(), "server to client");
            assertNull(atServer.closedCause.get(), "server channel failed");
            assertNull(atClient.closedCause.get(), "client channel failed");
            assertEquals(each, atServer.frames, "frames at the server");
            assertEquals(each, atClient.frames, "frames at the client");
            assertEquals(bytesToServer, atServer.bytes, "bytes at the server");
            assertEquals(bytesToClient, atClient.bytes, "bytes at the client");

            TransportStats clientStats = client.stats();
            TransportStats serverStats = serverChannel.stats();
            assertEquals(each, clientStats.framesSent(), "client transport: frames sent " + clientStats);
            assertEquals(bytesToServer, clientStats.bytesSent(), "client transport: bytes sent " + clientStats);
            assertEquals(each, clientStats.framesReceived(), "client transport: frames received " + clientStats);
            assertEquals(bytesToClient, clientStats.bytesReceived(), "client transport: bytes received");
            assertEquals(each, serverStats.framesSent(), "server transport: frames sent " + serverStats);
            assertEquals(bytesToClient, serverStats.bytesSent(), "server transport: bytes sent " + serverStats);
            assertEquals(each, serverStats.framesReceived(), "server transport: frames received " + serverStats);
            assertEquals(bytesToServer, serverStats.bytesReceived(), "server transport: bytes received");

            double seconds = (end - start) / 1e9;
            System.out.printf(Locale.ROOT, "transport soak: %,d frames (%,d each way, %d of 16 MiB each way), "
                    + "%.1f s; rnrRetryCount=%d both sides%n", 2 * each, each, GIANTS_EACH_WAY, seconds,
                    config.rnrRetryCount());
            report("client->server", each, bytesToServer, (atServer.doneAt - start) / 1e9, clientStats);
            report("server->client", each, bytesToClient, (atClient.doneAt - start) / 1e9, serverStats);
            return new Outcome<>(bytesToServer + bytesToClient, clientStats, serverStats, before, after);
        }
    }

    /** What a soak carried: its payload bytes (both ways), each end's counters, and the fabric's before and after. */
    public record Outcome<C>(long payload, TransportStats client, TransportStats server, C before, C after) {
    }

    @Test
    void framesBothWaysWithoutOneRnr() throws Exception {
        TransportConfig config = strict();
        assertEquals(0, config.rnrRetryCount());
        Outcome<RxeHwCounters> soaked = soak(config, Lab.addr1(), Lab.freshPort(), FRAMES, RxeHwCounters::now);
        RxeHwCounters moved = soaked.after().since(soaked.before());
        TransportStats clientStats = soaked.client();
        TransportStats serverStats = soaked.server();
        System.out.println("transport soak: rxe hw counters moved: " + moved.nonZero());

        Map<String, Long> rnr = moved.rnr();
        System.out.println("transport soak: RNR counters moved: " + rnr);
        rnr.forEach((name, v) -> assertEquals(0L, v, "rxe hw counter " + name + " moved: " + moved.nonZero()));
        // rxe counts every SEND message it carried: exactly the SENDs our two channels posted (data, packed
        // and credit frames), so nothing of this traffic went any other way
        assertEquals(clientStats.sendsPosted() + serverStats.sendsPosted(), moved.get("rdma_sends"),
                "rxe's rdma_sends against our channels' SENDs: " + moved.nonZero());
        // frames larger than a slot went in whole-slot fragments with their header in immediate data
        // (SEND_WITH_IMM on rxe), both ways; order and content are checked above
        assertTrue(clientStats.immediateSends() > 0 && serverStats.immediateSends() > 0,
                "no fragment went with its header in immediate data: " + clientStats + " / " + serverStats);
        // both ends live on one rxe device: every data packet (at most 4 KiB of payload) passes its counter
        assertTrue(moved.get("sent_pkts") >= soaked.payload() / 4096, "rxe sent " + moved.get("sent_pkts")
                + " packets for " + soaked.payload() + " payload bytes: the frames did not go over RDMA");
    }

    private static void report(String direction, long frames, long bytes, double seconds, TransportStats sender) {
        System.out.printf(Locale.ROOT, "transport soak: %s %,d frames, %,d bytes in %.1f s: %,.0f frames/s, "
                        + "%.1f MB/s; sender %d SENDs (%d frames packed into %d, %d with immediate data), %d credit "
                        + "stalls%n", direction, frames, bytes, seconds, frames / seconds, bytes / seconds / 1e6,
                sender.sendsPosted(), sender.framesPacked(), sender.packedSends(), sender.immediateSends(),
                sender.creditStalls());
    }

    private static CompletableFuture<Long> writer(String name, RdmaChannel channel, Checker own, SoakMix mix) {
        CompletableFuture<Long> written = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                writeAll(channel, own, mix);
                written.complete(System.nanoTime());
            } catch (Throwable e) {
                written.completeExceptionally(e);
            }
        }, name);
        t.setDaemon(true);
        t.start();
        return written;
    }

    /**
     * Waits until both receivers have every frame; fails at once on a mismatch, a closed channel, a failed writer
     * or a minute without progress.
     */
    private static void awaitAll(Checker atServer, Checker atClient, CompletableFuture<Long> up,
                                 CompletableFuture<Long> down, long each) throws InterruptedException {
        long lastProgress = System.nanoTime();
        long lastCount = -1;
        while (atServer.frames < each || atClient.frames < each) {
            String why = atServer.mismatch.get() != null ? "client to server: " + atServer.mismatch.get()
                    : atClient.mismatch.get() != null ? "server to client: " + atClient.mismatch.get()
                    : atServer.closed ? "server channel closed: " + atServer.closedCause.get()
                    : atClient.closed ? "client channel closed: " + atClient.closedCause.get()
                    : up.isCompletedExceptionally() ? "client writer failed: " + up.handle((v, e) -> e).join()
                    : down.isCompletedExceptionally() ? "server writer failed: " + down.handle((v, e) -> e).join()
                    : null;
            if (why != null) {
                fail(why + " (server has " + atServer.frames + ", client " + atClient.frames + " of " + each + ")");
            }
            long count = atServer.frames + atClient.frames;
            if (count != lastCount) {
                lastCount = count;
                lastProgress = System.nanoTime();
            } else if (System.nanoTime() - lastProgress > STALL_NANOS) {
                fail("no frame delivered for 60 s: server has " + atServer.frames + ", client " + atClient.frames
                        + " of " + each);
            }
            Thread.sleep(20);
        }
    }
}
