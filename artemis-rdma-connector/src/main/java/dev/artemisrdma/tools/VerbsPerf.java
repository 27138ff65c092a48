package dev.artemisrdma.tools;

import org.HdrHistogram.Histogram;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.fabric.CompletionQueue;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.ConnectOptions;
import dev.artemisrdma.transport.fabric.ConnectionRequest;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.Fabric;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.FabricListener;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.fabric.QueuePairSpec;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.fabric.RegisteredMemory;
import dev.artemisrdma.transport.fabric.SendList;
import dev.artemisrdma.transport.fabric.WcStatus;

/**
 * The bare data path, as ib_send_lat / ib_send_bw measure it: SENDs into pre-posted receives, busy-polled
 * completions, selective signalling, batched reposts. No framing and no credits: the peer accepts with infinite
 * RNR retry, as perftest does.
 *
 * <p>Threads: each connection's {@code Side} has one thread at a time and no lock. A client runs on the calling
 * thread, which connects, posts, polls and closes. A server side is set up on the rdma_cm event thread that hands it
 * the request; its "established" event starts one thread per connection (the start orders what was set up before),
 * which polls, posts and finally closes it.
 */
final class VerbsPerf {

    private static final int MAGIC = 0x52505246; // "RPRF"
    private static final int SQ_DEPTH = 128;
    private static final int SIGNAL_EVERY = 16;
    private static final int REPOST_BATCH = 16;
    private static final long MEMORY_BUDGET = 256L << 20;

    private VerbsPerf() {
    }

    /** One side of a perf connection: its queue pair, completion queue, send buffer and receive slots. */
    private static final class Side implements ConnectionSetup, QueuePairEvents, AutoCloseable {
        final int size;
        final int rxDepth;
        CompletionQueue cq;
        RegisteredMemory memory;
        QueuePair qp;
        final RecvList reposts = new RecvList(REPOST_BATCH);
        final Completions completions = new Completions(64);
        final SendList send = new SendList(1, 1);
        final CountDownLatch gone = new CountDownLatch(1);
        int inline;

        Side(int size, int rxDepth) {
            this.size = size;
            this.rxDepth = rxDepth;
        }

        @Override
        public QueuePairSpec queuePairSpec(FabricDevice device) throws FabricException {
            cq = device.createCompletionQueue(Math.min(device.limits().maxCqe(), SQ_DEPTH + rxDepth + 64));
            memory = device.register((int) ((long) size * (rxDepth + 1)));
            int allowed = device.limits().maxInlineData(); // -1: unknown, ask as perftest does by default
            return new QueuePairSpec(cq, SQ_DEPTH, rxDepth, 1, 1, Math.min(size, allowed < 0 ? 256 : allowed));
        }

        @Override
        public void prepare(QueuePair queuePair) throws FabricException {
            qp = queuePair;
            inline = size <= queuePair.caps().maxInlineData() ? SendList.FLAG_INLINE : 0;
            RecvList all = new RecvList(rxDepth);
            for (int slot = 0; slot < rxDepth; slot++) {
                all.add(slot, slotAddress(slot), size, memory.lkey());
            }
            queuePair.postRecv(all);
        }

        long slotAddress(int slot) {
            return memory.address() + (long) size * (slot + 1); // slot -1 (offset 0) is the send buffer
        }

        void repost(long slot) throws FabricException {
            reposts.add(slot, slotAddress((int) slot), size, memory.lkey());
            if (reposts.size() == REPOST_BATCH) {
                flushReposts();
            }
        }

        void flushReposts() throws FabricException {
            if (!reposts.isEmpty()) {
                qp.postRecv(reposts);
                reposts.clear();
            }
        }

        void post(long wrId, boolean signaled) throws FabricException {
            send.clear();
            send.addSend(wrId, (signaled ? SendList.FLAG_SIGNALED : 0) | inline)
                    .addSge(memory.address(), size, memory.lkey());
            qp.postSend(send);
        }

        @Override
        public void disconnected(QueuePair queuePair, String reason) {
            gone.countDown();
        }

        @Override
        public void close() {
            if (qp != null) {
                qp.disconnect();
                qp.close();
            }
            if (cq != null) {
                cq.close();
            }
            if (memory != null) {
                memory.close();
            }
        }
    }

    private static int rxDepth(int size) {
        return (int) Math.max(4, Math.min(512, MEMORY_BUDGET / size - 1));
    }

    private static void check(Completions c, int i) throws FabricException {
        if (!c.isSuccess(i)) {
            throw new FabricException("work completion failed: " + WcStatus.name(c.status(i)) + " ("
                    + WcStatus.meaning(c.status(i)) + ")");
        }
    }

    // ---------------------------------------------------------------- server

    static FabricListener listen(Fabric fabric, InetSocketAddress bind) throws FabricException {
        return fabric.listen(bind, VerbsPerf::onRequest);
    }

    private static void onRequest(ConnectionRequest request) {
        ByteBuffer hello = ByteBuffer.wrap(request.privateData());
        if (hello.remaining() < 13 || hello.getInt() != MAGIC) {
            request.reject("not an RdmaPerf client".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
            return;
        }
        boolean latency = hello.get() == 0;
        int size = hello.getInt();
        long total = hello.getInt() & 0xffffffffL;
        Side side = new Side(size, latency ? 64 : rxDepth(size));
        try {
            request.accept(side, new byte[0], 7, new QueuePairEvents() {
                @Override
                public void established(QueuePair queuePair) {
                    Thread t = new Thread(() -> serve(side, latency, total), "rdmaperf-verbs-server");
                    t.setDaemon(true);
                    t.start();
                }

                @Override
                public void disconnected(QueuePair queuePair, String reason) {
                    side.disconnected(queuePair, reason);
                }
            });
        } catch (FabricException e) {
            System.err.println("rdmaperf: accepting " + request.peerAddress() + " failed: " + e.getMessage());
            side.close();
        }
    }

    private static void serve(Side side, boolean latency, long total) {
        try {
            long received = 0;
            long sent = 0;
            while (received < total) {
                int n = side.cq.pollSpinning(side.completions, 64);
                for (int i = 0; i < n; i++) {
                    check(side.completions, i);
                    if (side.completions.isReceive(i)) {
                        received++;
                        side.repost(side.completions.wrId(i)); // posted in groups of REPOST_BATCH
                        if (latency) {
                            side.post(received, ++sent % SIGNAL_EVERY == 0);
                        }
                    }
                }
            }
            side.flushReposts();
            if (!latency) {
                side.post(-1, true); // tells the client every message arrived
            }
            side.gone.await(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            System.err.println("rdmaperf: verbs server connection failed: " + e.getMessage());
        } finally {
            side.close();
        }
    }

    // ---------------------------------------------------------------- client

    static PerfResult run(Fabric fabric, PerfOptions options) throws Exception {
        boolean latency = options.mode().equals("lat");
        long total = (long) options.warmup() + options.iters();
        ByteBuffer hello = ByteBuffer.allocate(13).putInt(MAGIC).put((byte) (latency ? 0 : 1))
                .putInt(options.size()).putInt((int) total);
        Side side = new Side(options.size(), latency ? 64 : 4);
        try {
            fabric.connect(new InetSocketAddress(options.address(), options.port()), side,
                    new ConnectOptions(hello.array(), 7, 7, Duration.ofSeconds(30)), side);
            return latency ? pingPong(side, options) : stream(side, options);
        } finally {
            side.close();
        }
    }

    private static PerfResult pingPong(Side side, PerfOptions options) throws FabricException {
        // One clock read per round trip: the time between consecutive answers is one round trip (send included).
        // The lab guest's clock costs about 1 us a read, as much as part of what is measured.
        Histogram histogram = new Histogram(3_600_000_000L, 3);
        long total = (long) options.warmup() + options.iters();
        long start = 0;
        long startCpu = ProcessCpu.nanos();
        long startJit = JitTime.millis();
        long previous = System.nanoTime();
        for (long i = 1; i <= total; i++) {
            side.post(i, i % SIGNAL_EVERY == 0);
            boolean answered = false;
            while (!answered) {
                int n = side.cq.pollSpinning(side.completions, 64);
                for (int c = 0; c < n; c++) {
                    check(side.completions, c);
                    if (side.completions.isReceive(c)) {
                        answered = true;
                        side.repost(side.completions.wrId(c));
                    }
                }
            }
            long now = System.nanoTime();
            // the warm-up records too (and is reset away), so the window runs no code the warm-up did not compile
            histogram.recordValue((now - previous) / 2); // one-way, as ib_send_lat reports
            if (i == options.warmup()) {
                histogram.reset();
                start = now;
                startCpu = ProcessCpu.nanos();
                startJit = JitTime.millis();
            }
            previous = now;
        }
        long elapsed = System.nanoTime() - start;
        System.out.println(ProcessCpu.line(startCpu, ProcessCpu.nanos(), options.iters()));
        System.out.println(JitTime.line(startJit, JitTime.millis()));
        return PerfResult.of("verbs", "lat", options.size(), options.iters(), histogram, elapsed, options.iters());
    }

    private static PerfResult stream(Side side, PerfOptions options) throws FabricException {
        // p50/p99 in bw mode: the mean time per message over each window of 1024 messages (as TransportPerf)
        Histogram histogram = new Histogram(3_600_000_000L, 3);
        long total = (long) options.warmup() + options.iters();
        long posted = 0;
        long completed = 0;
        long start = 0;
        long startCpu = -1;
        long startJit = -1;
        long windowStart = System.nanoTime();
        boolean done = false;
        while (!done) {
            while (posted < total && posted - completed < SQ_DEPTH - SIGNAL_EVERY) {
                posted++;
                if (posted == options.warmup() + 1) {
                    start = System.nanoTime();
                    startCpu = ProcessCpu.nanos();
                    startJit = JitTime.millis();
                }
                side.post(posted, posted % SIGNAL_EVERY == 0 || posted == total);
                if (posted % 1024 == 0) {
                    long now = System.nanoTime();
                    if (posted > options.warmup()) {
                        histogram.recordValue((now - windowStart) / 1024);
                    }
                    windowStart = now;
                }
            }
            int n = side.cq.poll(side.completions);
            for (int c = 0; c < n; c++) {
                check(side.completions, c);
                if (side.completions.isReceive(c)) {
                    done = true; // the server's "all arrived"
                } else {
                    completed = side.completions.wrId(c);
                }
            }
        }
        long elapsed = System.nanoTime() - start;
        System.out.println(ProcessCpu.line(startCpu, ProcessCpu.nanos(), options.iters()));
        System.out.println(JitTime.line(startJit, JitTime.millis()));
        if (histogram.getTotalCount() == 0) {
            histogram.recordValue(Math.max(1, elapsed / options.iters()));
        }
        return PerfResult.of("verbs", "bw", options.size(), options.iters(), histogram, elapsed, options.iters());
    }
}
