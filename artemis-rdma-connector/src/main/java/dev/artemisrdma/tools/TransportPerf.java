package dev.artemisrdma.tools;

import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.api.SendBuffer;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.Fabric;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.stats.LoopStats;
import org.HdrHistogram.Histogram;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The transport-layer side of {@link RdmaPerf}: the same workloads as {@link VerbsPerf}, through framing, credits,
 * the send queue and the completion loop. Work is driven from the loop's callbacks (the next ping is written from
 * the handler that received the pong), as an event-driven application would.
 *
 * <p>The first frame of a connection says what follows: magic, mode, size, count ({@link TransportHello}). With
 * {@code --settle} both modes warm up in rehearsal windows until the JIT is quiet: the ping-pong's server echoes
 * whatever comes; a settled stream's server acknowledges each window's last frame, which the client marks.
 *
 * <p>Threads: a client run's calling thread connects, writes the hello, starts the workload and waits on the
 * client's latch; the handlers' callbacks run on the completion loop. A client's figures are written by the loop
 * and read by the caller after the latch; a stream's {@code pump}, which the caller starts and the loop resumes, is
 * synchronized on the client. A server handler is one per connection, on its loop only.
 */
final class TransportPerf {

    private TransportPerf() {
    }

    private static final String CONFIG_PROPERTY_PREFIX = "rdmaperf.transport.";

    /**
     * The configuration each end uses: the defaults with a busy-poll window as long as ib_send_lat's spin, then any
     * transport parameter given as a system property {@code rdmaperf.transport.KEY} (as ib_send_bw's -r and -t:
     * {@code -Drdmaperf.transport.receiveSlots=512}). Unknown keys are refused by name.
     */
    static TransportConfig config() {
        Map<String, String> values = new HashMap<>();
        values.put("busyPollMicros", System.getProperty("rdmaperf.busyPollMicros", "2000"));
        for (String name : System.getProperties().stringPropertyNames()) {
            if (name.startsWith(CONFIG_PROPERTY_PREFIX)) {
                values.put(name.substring(CONFIG_PROPERTY_PREFIX.length()), System.getProperty(name));
            }
        }
        return TransportConfig.fromMap(values);
    }

    // ---------------------------------------------------------------- server

    static AutoCloseable listen(Fabric fabric, InetSocketAddress bind) throws FabricException {
        RdmaTransport transport = RdmaTransport.create(fabric, config());
        RdmaServer server = transport.listen(bind, channel -> new ServerHandler(transport));
        return () -> {
            server.close();
            transport.close();
        };
    }

    /** Echoes every frame (lat) or counts them and acknowledges as {@link StreamAcks} says (bw). */
    private static final class ServerHandler implements ChannelHandler {
        private final RdmaTransport transport;
        /** The server's loop statistics when this connection opened: what it cost is the difference at close. */
        private final LoopStats loopsAtOpen;
        private boolean helloSeen;
        private boolean latency;
        private StreamAcks acks;
        private long received;

        ServerHandler(RdmaTransport transport) {
            this.transport = transport;
            this.loopsAtOpen = transport.loopStats();
        }

        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            try {
                if (!helloSeen) {
                    TransportHello hello = TransportHello.read(frame);
                    if (hello == null) {
                        System.err.println("rdmaperf: " + channel.remoteAddress() + " is not an RdmaPerf client");
                        channel.forceClose();
                        return;
                    }
                    latency = hello.latency(); // the size is the frames' own
                    acks = new StreamAcks(hello);
                    helloSeen = true;
                    return;
                }
                received++;
                if (latency) {
                    SendBuffer reply = channel.allocate(frame.remaining());
                    reply.buffer().put(frame);
                    channel.write(reply, true);
                } else if (acks.acknowledges(frame, received)) {
                    channel.write(ByteBuffer.wrap(new byte[] {1}), true);
                }
            } catch (FabricException e) {
                System.err.println("rdmaperf: transport server " + channel.id() + ": " + e.getMessage());
            }
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
            // the client went away: what the server's loops did for it goes to the server's log
            System.out.println("rdmaperf server: " + channel.id() + " " + received + " frames, loop stats "
                    + LoopDelta.of(loopsAtOpen, transport.loopStats()));
        }
    }

    // ---------------------------------------------------------------- client

    static PerfResult run(Fabric fabric, PerfOptions options) throws Exception {
        boolean latency = options.mode().equals("lat");
        long total = (long) options.warmup() + options.iters();
        try (RdmaTransport transport = RdmaTransport.create(fabric, config())) {
            boolean settledStream = !latency && options.settle() > 0;
            Client client = latency ? new PingPong(options)
                    : settledStream ? new SettledStream(options) : new Stream(options);
            RdmaChannel channel = transport.connect(new InetSocketAddress(options.address(), options.port()),
                    client);
            try {
                // a settled stream's count is not known in advance: its server acknowledges the marked frames
                channel.write(new TransportHello(latency, options.size(),
                        settledStream ? TransportHello.UNTIL_CLOSE : total).encode(), true);
                client.start(channel);
                if (!client.done.await(Math.max(120, total / 500) + options.settle(), TimeUnit.SECONDS)) {
                    throw new FabricException("timed out after " + client.completed + " of " + total
                            + " messages");
                }
                if (client.failure.get() != null) {
                    throw new FabricException("run failed: " + client.failure.get());
                }
                System.out.println("rdmaperf: transport stats " + channel.stats());
                System.out.println("rdmaperf: loop stats " + LoopDelta.of(LoopStats.NONE, transport.loopStats()));
                System.out.println(ProcessCpu.line(client.startCpu, client.endCpu, options.iters()));
                System.out.println(JitTime.line(client.startJit, client.endJit));
                System.out.println(client.settle.line());
                // the warm-up, any rehearsals and the window: what the server handled for this client
                System.out.println("rdmaperf: messages_in_all=" + client.completed);
                return client.result();
            } finally {
                channel.close();
            }
        }
    }

    /** Shared state of a client run; its handler methods run on the completion-loop thread. */
    private abstract static class Client implements ChannelHandler {
        final PerfOptions options;
        final long total;
        /** When the warm-up is done; off (its count alone) without {@code --settle}. */
        final JitSettle settle;
        final Histogram histogram = new Histogram(3_600_000_000L, 3);
        final CountDownLatch done = new CountDownLatch(1);
        final AtomicReference<String> failure = new AtomicReference<>();
        volatile long completed;
        long startNanos;
        long endNanos;
        long startCpu = -1; // process CPU over the measured window (after the warmup), as startNanos..endNanos
        long endCpu = -1;
        long startJit = -1; // JIT compiling over the same window
        long endJit = -1;

        Client(PerfOptions options) {
            this.options = options;
            this.total = (long) options.warmup() + options.iters();
            this.settle = new JitSettle(options.settle());
        }

        abstract void start(RdmaChannel channel) throws FabricException;

        abstract PerfResult result();

        void send(RdmaChannel channel, boolean flush) throws FabricException {
            SendBuffer buffer = channel.allocate(options.size());
            ByteBuffer b = buffer.buffer();
            b.position(options.size()); // contents do not matter; the size does
            channel.write(buffer, flush);
        }

        void fail(String why) {
            failure.compareAndSet(null, why);
            done.countDown();
        }

        /** A close before the run is done fails it: with rehearsal windows a run can close past {@code total}. */
        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
            if (done.getCount() > 0) {
                fail("channel closed after " + completed + " messages: " + (cause == null ? "closed" : cause));
            }
        }
    }

    /**
     * One frame out, the echo back, the next frame out from the echo's callback. The round trips run in windows,
     * every one the same code: the first is the warm-up's count; each one's end opens the next, {@code iters} long,
     * which is measured once the warm-up is done (with {@code --settle}: once a whole window went by with the JIT
     * quiet, {@link JitSettle}); until then it is a rehearsal whose figures are reset away. So the measured window runs
     * nothing the JIT has not seen: a branch taken for the first time when measuring began made C2 throw its compiled
     * code away and compile again inside the window (up to 1.9 s of compiler CPU in it, after a quiet warm-up).
     */
    private static final class PingPong extends Client {
        private final SettleWindows windows;
        private long previous;

        PingPong(PerfOptions options) {
            super(options);
            this.windows = new SettleWindows(options.warmup(), options.iters(), settle);
        }

        @Override
        void start(RdmaChannel channel) throws FabricException {
            startCpu = ProcessCpu.nanos();
            startJit = JitTime.millis();
            previous = System.nanoTime();
            startNanos = previous;
            send(channel, true);
        }

        /** One clock read per round trip, as in VerbsPerf: consecutive answers are one round trip apart. */
        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            long now = System.nanoTime();
            long n = ++completed;
            histogram.recordValue((now - previous) / 2); // one-way, as ib_send_lat reports
            if (n == windows.end()) {
                endNanos = now;
                endCpu = ProcessCpu.nanos();
                endJit = JitTime.millis();
                if (windows.ended(startNanos, startJit, endNanos, endJit)) {
                    done.countDown();
                    return;
                }
                // the next window: measured once the warm-up is done, else one more rehearsal
                histogram.reset();
                startCpu = endCpu;
                startJit = endJit;
                now = System.nanoTime(); // reading /proc is no part of the window's first round trip
                startNanos = now;
            }
            previous = now;
            try {
                send(channel, true);
            } catch (FabricException e) {
                fail(e.getMessage());
            }
        }

        @Override
        PerfResult result() {
            return PerfResult.of("transport", "lat", options.size(), options.iters(), histogram,
                    endNanos - startNanos, options.iters());
        }
    }

    /** What both streams share: writes resume when the channel is writable again; the result from the histogram. */
    private abstract static class Streaming extends Client {
        /** Frames written so far, every window's. */
        long written;
        /** When the current batch of 1024 frames began: the histogram holds each batch's mean per frame. */
        long batchStart;

        Streaming(PerfOptions options) {
            super(options);
        }

        /** Writes until the channel is not writable (then onWritable resumes) or the stream has written its part. */
        abstract void pump(RdmaChannel channel) throws FabricException;

        @Override
        public void onWritable(RdmaChannel channel) {
            try {
                pump(channel);
            } catch (FabricException e) {
                fail(e.getMessage());
            }
        }

        @Override
        PerfResult result() {
            if (histogram.getTotalCount() == 0) {
                histogram.recordValue(Math.max(1, (endNanos - startNanos) / Math.max(1, options.iters())));
            }
            return PerfResult.of("transport", "bw", options.size(), options.iters(), histogram,
                    endNanos - startNanos, options.iters());
        }
    }

    /** Frames written as fast as the channel stays writable; the server acknowledges the last one. */
    private static final class Stream extends Streaming {

        Stream(PerfOptions options) {
            super(options);
        }

        @Override
        void start(RdmaChannel channel) throws FabricException {
            startNanos = System.nanoTime();
            startCpu = ProcessCpu.nanos();
            startJit = JitTime.millis();
            batchStart = startNanos;
            pump(channel);
        }

        @Override
        synchronized void pump(RdmaChannel channel) throws FabricException {
            while (written < total && channel.isWritable()) {
                written++;
                if (written == options.warmup()) {
                    startNanos = System.nanoTime();
                    startCpu = ProcessCpu.nanos();
                    startJit = JitTime.millis();
                }
                send(channel, written % 16 == 0 || written == total);
                if (written % 1024 == 0) {
                    long now = System.nanoTime();
                    histogram.recordValue((now - batchStart) / 1024); // mean per-message time of each 1024
                    batchStart = now;
                }
            }
            completed = written;
        }

        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            endNanos = System.nanoTime();
            endCpu = ProcessCpu.nanos();
            endJit = JitTime.millis();
            completed = total;
            done.countDown();
        }
    }

    /**
     * A stream in windows, as the settled ping-pong runs ({@link SettleWindows}): the warm-up's count, then windows
     * of {@code iters}, each ended by the server's acknowledgement of its last frame (marked, {@link StreamAcks}),
     * until a window went by with the JIT quiet; the next one is measured. Every window drains the pipeline and waits
     * for its acknowledgement, so the measured one runs the code the rehearsals ran: in the lab's 64 KiB streams,
     * measured right after the warm-up's count, C2 compiled for 2.2-2.9 s of an 8 s window.
     *
     * <p>The pump runs on the caller's thread from start() and on the completion loop's from onWritable and the
     * acknowledgement; one lock keeps the window's state and the histogram consistent between them.
     */
    private static final class SettledStream extends Streaming {
        private final SettleWindows windows;

        SettledStream(PerfOptions options) {
            super(options);
            this.windows = new SettleWindows(options.warmup(), options.iters(), settle);
        }

        @Override
        synchronized void start(RdmaChannel channel) throws FabricException {
            startCpu = ProcessCpu.nanos();
            startJit = JitTime.millis();
            startNanos = System.nanoTime(); // after reading /proc, which is no part of the window
            batchStart = startNanos;
            pump(channel);
        }

        @Override
        synchronized void pump(RdmaChannel channel) throws FabricException {
            long end = windows.end();
            while (written < end && channel.isWritable()) {
                long inWindow = ++written - windows.begin();
                boolean last = written == end;
                sendMarked(channel, last, inWindow % 16 == 0 || last);
                if (inWindow % 1024 == 0) {
                    long now = System.nanoTime();
                    histogram.recordValue((now - batchStart) / 1024); // mean per-message time of each 1024
                    batchStart = now;
                }
            }
            completed = written;
        }

        /** Every frame carries the mark byte, 0 or 1, so that every window writes the same way. */
        private void sendMarked(RdmaChannel channel, boolean last, boolean flush) throws FabricException {
            SendBuffer buffer = channel.allocate(options.size());
            ByteBuffer b = buffer.buffer();
            b.put(last ? StreamAcks.MARK : 0);
            b.position(options.size()); // the rest does not matter; the size does
            channel.write(buffer, flush);
        }

        /** The server acknowledged the current window's last frame: the window ends, the next one begins. */
        @Override
        public synchronized void onFrame(RdmaChannel channel, ByteBuffer frame) {
            long now = System.nanoTime();
            if (written != windows.end()) {
                fail("acknowledgement after frame " + written + ", before the window's last (" + windows.end() + ")");
                return;
            }
            endNanos = now;
            endCpu = ProcessCpu.nanos();
            endJit = JitTime.millis();
            if (windows.ended(startNanos, startJit, endNanos, endJit)) {
                done.countDown();
                return;
            }
            // a rehearsal ended: its figures go, the next window starts (measured once the JIT is quiet)
            histogram.reset();
            startCpu = endCpu;
            startJit = endJit;
            startNanos = System.nanoTime(); // reading /proc is no part of the next window
            batchStart = startNanos;
            try {
                pump(channel);
            } catch (FabricException e) {
                fail(e.getMessage());
            }
        }
    }
}
