package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.api.SendBuffer;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.inmemory.MemoryFabric;

/**
 * Issue 39's second rule: on the steady path, for frames up to a slot, the transport allocates nothing per frame,
 * neither on the writer's thread nor on the completion loops (the receiver's, which takes the frame and returns
 * credit, and the sender's, which takes the send completions and the credit). Measured with the JVM's count of the
 * bytes each thread allocated ({@code com.sun.management.ThreadMXBean#getThreadAllocatedBytes}) over 100,000 frames
 * after a warm-up (rounds of as many, until the send pools stopped growing), with at most {@value #WINDOW} frames in
 * flight, on the fast in-memory fabric (which itself allocates nothing on that path); the figure per frame is
 * printed. A window in which a pool grew (a slab carved into buffers at a new high-water mark, not a per-frame cost)
 * is measured again. Both ways of writing: a frame copied from the caller's buffer, and one encoded into a send buffer
 * of the channel's registered memory.
 */
class SteadyPathAllocationTest {
    private static final int FRAMES = 100_000;
    /** Frames written and not yet received, at most: the flow's depth. */
    private static final int WINDOW = 256;
    /** What a frame may cost a thread: room for the loops' timer ticks and log-free bookkeeping, not for an object. */
    private static final double MAX_BYTES_PER_FRAME = 4.0;
    /**
     * What a frame written in a send buffer may cost the writer: its lease (RdmaChannel.allocate's SendBuffer, 24 B with
     * compressed references), the ownership token of one hand-out, which must stay a new object (a stale lease's
     * release must find another generation and do nothing, PooledBuffer), unless the JIT scalar-replaces it (some
     * runs measure under 1 B), and the few bytes.
     */
    private static final double MAX_BYTES_PER_LEASED_FRAME = 24 + MAX_BYTES_PER_FRAME;

    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    /** Counts frames on the receiver's loop thread; allocates nothing. */
    private static final class Counting implements ChannelHandler {
        volatile long frames;
        volatile long bytes;

        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            bytes += frame.remaining();
            frames++;
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
        }
    }

    @ParameterizedTest(name = "{0} B copied from the caller's buffer")
    @ValueSource(ints = {64, 1024})
    void copiedFramesAllocateNothingPerFrame(int size) throws Exception {
        measure(size, false);
    }

    @ParameterizedTest(name = "{0} B written in a send buffer")
    @ValueSource(ints = {64, 1024})
    void sendBufferFramesAllocateNothingPerFrame(int size) throws Exception {
        measure(size, true);
    }

    private void measure(int size, boolean sendBuffers) throws Exception {
        assertTrue(THREADS.isThreadAllocatedMemorySupported() && THREADS.isThreadAllocatedMemoryEnabled(),
                "this JVM counts the bytes each thread allocates");
        TransportConfig config = TransportConfig.builder().busyPollMicros(0).build();
        assertTrue(size <= config.slotSize(), "a frame up to a slot");
        MemoryFabric fabric = new MemoryFabric();
        RdmaTransport server = RdmaTransport.create(fabric, config);
        RdmaTransport client = RdmaTransport.create(fabric, config);
        try {
            Counting received = new Counting();
            CompletableFuture<RdmaChannel> accepted = new CompletableFuture<>();
            RdmaServer listener = server.listen(new InetSocketAddress("127.0.0.1", 0),
                    Peers.admitting(c -> { }, accepted::complete, received));
            RdmaChannel channel = client.connect(listener.localAddress(), new Counting());
            accepted.get(5, TimeUnit.SECONDS);
            List<Thread> loops = loopThreads();
            assertFalse(loops.isEmpty(), "completion loop threads found");

            ByteBuffer payload = ByteBuffer.allocateDirect(size);
            for (int i = 0; i < size; i++) {
                payload.put(i, (byte) i);
            }
            // warm-up: the JIT, and the send pools grown to the flow's depth (a pool grows by a slab carved into
            // buffers, once per new high-water mark of a size class: not per frame, so not in a measured window)
            long registered = -1;
            for (int round = 0; round < 10 && registered != registered(client, server); round++) {
                registered = registered(client, server);
                send(channel, payload, FRAMES, sendBuffers, received);
            }
            long writer = Thread.currentThread().getId();
            long writerBytes = 0;
            long[] before = new long[0];
            long[] after = new long[0];
            for (int attempt = 1; attempt <= 3; attempt++) {
                registered = registered(client, server);
                before = allocated(loops);
                long writerBefore = THREADS.getThreadAllocatedBytes(writer);
                send(channel, payload, FRAMES, sendBuffers, received);
                writerBytes = THREADS.getThreadAllocatedBytes(writer) - writerBefore;
                after = allocated(loops);
                if (registered == registered(client, server)) {
                    break;
                }
                System.out.printf(Locale.ROOT, "steady path, %d B frames: a send pool grew during window %d, "
                        + "measuring again%n", size, attempt);
            }
            assertEquals(registered, registered(client, server), "no pool grew in the measured window");
            assertEquals(received.frames * size, received.bytes, "every byte arrived");
            assertEquals(0, fabric.rnrWaits(), "credits kept every SEND within the receives posted");

            List<String> failures = new ArrayList<>();
            report(failures, "writer (" + Thread.currentThread().getName() + ")", writerBytes, size, sendBuffers,
                    sendBuffers ? MAX_BYTES_PER_LEASED_FRAME : MAX_BYTES_PER_FRAME);
            for (int t = 0; t < loops.size(); t++) {
                report(failures, "loop " + loops.get(t).getName(), after[t] - before[t], size, sendBuffers,
                        MAX_BYTES_PER_FRAME);
            }
            assertTrue(failures.isEmpty(), String.join("; ", failures));
            channel.close();
        } finally {
            client.close();
            server.close();
            fabric.close();
        }
    }

    private static long registered(RdmaTransport client, RdmaTransport server) {
        return client.registeredBytes() + server.registeredBytes();
    }

    private static void send(RdmaChannel channel, ByteBuffer payload, int frames, boolean sendBuffers,
                             Counting received) throws Exception {
        long already = received.frames;
        for (int i = 0; i < frames; i++) {
            // a steady flow, not a queue filled to its cap: the pools grow to the window once, in the warm-up
            while (!channel.isWritable() || already + i - received.frames >= WINDOW) {
                Thread.onSpinWait();
            }
            if (sendBuffers) {
                SendBuffer b = channel.allocate(payload.capacity());
                b.buffer().put(b.buffer().position(), payload, 0, payload.capacity());
                b.buffer().position(b.buffer().position() + payload.capacity());
                channel.write(b, true);
            } else {
                payload.clear();
                channel.write(payload, true);
            }
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (received.frames < already + frames && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertEquals(already + frames, received.frames, "frames received");
    }

    private static void report(List<String> failures, String thread, long bytes, int size, boolean sendBuffers,
                               double max) {
        double perFrame = (double) bytes / FRAMES;
        System.out.printf(Locale.ROOT, "steady path, %d B frames %s: %s allocated %d bytes over %d frames, %.3f B "
                + "per frame%n", size, sendBuffers ? "in send buffers" : "copied", thread, bytes, FRAMES, perFrame);
        if (perFrame > max) {
            failures.add(String.format(Locale.ROOT, "%s allocated %.2f bytes per %d B frame (at most %.0f)", thread,
                    perFrame, size, max));
        }
    }

    /** The transports' completion loop threads (rdma-N-DEVICE-cqK). */
    private static List<Thread> loopThreads() {
        List<Thread> loops = new ArrayList<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("rdma-") && t.getName().contains("-cq")) {
                loops.add(t);
            }
        }
        loops.sort((a, b) -> a.getName().compareTo(b.getName()));
        return loops;
    }

    private static long[] allocated(List<Thread> threads) {
        long[] bytes = new long[threads.size()];
        for (int t = 0; t < bytes.length; t++) {
            bytes[t] = THREADS.getThreadAllocatedBytes(threads.get(t).getId());
        }
        return bytes;
    }
}
