package dev.artemisrdma.it;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.verbs.VerbsFabric;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 23, the greedy writer, on rxe with the transport's defaults: a server streams to 20 clients, honouring
 * isWritable, while another of its writers ignores isWritable toward a 21st client that stopped taking frames (autoRead
 * off: it returns no credit). The greedy writer's connection fails at maxQueuedBytesPerConnection, named in the cause;
 * the 20 streams meet no send-memory refusal, none fails, and their rate while the greedy writer fills its queue is
 * printed against the rate before it (and must not collapse).
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class GreedyWriterLabTest {

    private static final int STREAMS = 20;
    private static final long WINDOW_MILLIS = 4_000;

    /** Counts the frames it receives; records why its channel closed. */
    private static final class Counting implements ChannelHandler {
        final AtomicLong frames = new AtomicLong();
        final CompletableFuture<FabricException> closed = new CompletableFuture<>();

        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            frames.incrementAndGet();
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
            closed.complete(cause);
        }
    }

    @Test
    void aWriterThatIgnoresIsWritableFailsOnlyItsOwnConnection() throws Exception {
        TransportConfig config = TransportConfig.defaults();
        try (VerbsFabric fabric = new VerbsFabric();
             RdmaTransport serverTransport = RdmaTransport.create(fabric, config);
             RdmaTransport clientTransport = RdmaTransport.create(fabric, config)) {
            BlockingQueue<RdmaChannel> accepted = new LinkedBlockingQueue<>();
            RdmaServer server = serverTransport.listen(Lab.address(Lab.addr1(), Lab.freshPort()), ch -> {
                accepted.add(ch);
                return new Counting();
            });
            List<Counting> streams = new ArrayList<>();
            List<RdmaChannel> toStreams = new ArrayList<>();
            for (int i = 0; i < STREAMS; i++) {
                Counting c = new Counting();
                clientTransport.connect(server.localAddress(), c);
                streams.add(c);
                toStreams.add(accepted.poll(10, TimeUnit.SECONDS));
            }
            Counting stalledEnd = new Counting();
            RdmaChannel stalled = clientTransport.connect(server.localAddress(), stalledEnd);
            RdmaChannel toStalled = accepted.poll(10, TimeUnit.SECONDS);
            assertNotNull(toStalled, "the server accepted no 21st connection");
            stalled.setAutoRead(false); // takes what it got, returns no credit: the server's frames queue up

            // the honest writer: 1 KiB frames to whichever stream is writable
            AtomicBoolean running = new AtomicBoolean(true);
            List<String> refusals = new java.util.concurrent.CopyOnWriteArrayList<>();
            Thread honest = new Thread(() -> {
                ByteBuffer frame = ByteBuffer.allocate(1024);
                while (running.get()) {
                    boolean wrote = false;
                    for (RdmaChannel ch : toStreams) {
                        try {
                            if (ch.isWritable()) {
                                ch.write(frame.clear(), true);
                                wrote = true;
                            }
                        } catch (FabricException | RuntimeException e) {
                            refusals.add(ch.id() + ": " + e);
                        }
                    }
                    if (!wrote) {
                        Thread.onSpinWait();
                    }
                }
            }, "honest-writer");
            honest.start();
            try {
                Thread.sleep(2_000); // under way
                double before = rate(streams);
                // the greedy writer: 1 MiB frames toward the stalled client, isWritable ignored, until refused
                long queued = 0;
                FabricException stopped = null;
                long t0 = System.nanoTime();
                long greedyStart = totalFrames(streams);
                ByteBuffer big = ByteBuffer.allocate(1 << 20);
                try {
                    while (true) {
                        toStalled.write(big.clear(), true);
                        queued += big.capacity();
                    }
                } catch (FabricException e) {
                    stopped = e;
                }
                // the streams' rate over the greedy writer's fill and the window after it
                Thread.sleep(Math.max(0, WINDOW_MILLIS - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0)));
                double during = (totalFrames(streams) - greedyStart) * 1e9 / (System.nanoTime() - t0);
                System.out.printf("GREEDY WRITER: stopped after %d MiB queued toward the stalled peer: %s; the %d "
                        + "streams: %.0f frames/s before, %.0f during (%.2fx)%n", queued >> 20, stopped.getMessage(),
                        STREAMS, before, during, during / before);
                assertTrue(stopped.getMessage().contains("maxQueuedBytesPerConnection"), "the greedy writer was "
                        + "stopped for another reason: " + stopped.getMessage());
                assertTrue(refusals.isEmpty(), "the honest writer was refused: " + refusals);
                for (int i = 0; i < STREAMS; i++) {
                    assertTrue(!streams.get(i).closed.isDone() && toStreams.get(i).isOpen(), "stream " + i
                            + " closed: " + (streams.get(i).closed.isDone() ? streams.get(i).closed.get() : "?"));
                }
                assertTrue(during >= 0.5 * before, "the streams' rate fell from " + before + " to " + during
                        + " frames/s while the greedy writer filled its queue");
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (toStalled.isOpen() && System.nanoTime() < deadline) {
                    Thread.sleep(10);
                }
                assertTrue(!toStalled.isOpen(), "the greedy writer's connection is still open");
            } finally {
                running.set(false);
                honest.join(10_000);
            }
        }
    }

    private static long totalFrames(List<Counting> ends) {
        return ends.stream().mapToLong(e -> e.frames.get()).sum();
    }

    /** Frames per second the ends received over one window. */
    private static double rate(List<Counting> ends) throws InterruptedException {
        long n0 = totalFrames(ends);
        long t0 = System.nanoTime();
        Thread.sleep(WINDOW_MILLIS);
        return (totalFrames(ends) - n0) * 1e9 / (System.nanoTime() - t0);
    }
}
