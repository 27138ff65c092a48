package dev.artemisrdma.transport;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.CRC32;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.fabric.FabricException;

/** Test plumbing: a recording handler, frame payloads with checksums, waiting helpers. */
public final class Peers {

    private Peers() {
    }

    /** An acceptor that refuses every request at once with {@code why}, which the peer reads as the reason. */
    public static ChannelAcceptor refusing(String why) {
        return new ChannelAcceptor() {
            @Override
            public void admit(RdmaChannel channel) {
                throw new IllegalStateException(why);
            }

            @Override
            public ChannelHandler onAccepted(RdmaChannel channel) {
                throw new AssertionError("nothing was admitted, so nothing can be established");
            }
        };
    }

    /**
     * An acceptor that hands {@code admitted} each channel when its request arrives (before it is established, so a
     * test can follow a handshake that never ends) and gives every established one {@code handler}.
     */
    public static ChannelAcceptor admitting(java.util.function.Consumer<RdmaChannel> admitted,
                                            ChannelHandler handler) {
        return admitting(admitted, established -> { }, handler);
    }

    /** As {@link #admitting(java.util.function.Consumer, ChannelHandler)}, also telling {@code established}. */
    public static ChannelAcceptor admitting(java.util.function.Consumer<RdmaChannel> admitted,
                                            java.util.function.Consumer<RdmaChannel> established,
                                            ChannelHandler handler) {
        return admittingEach(admitted, channel -> {
            established.accept(channel);
            return handler;
        });
    }

    /**
     * An acceptor that hands {@code admitted} each channel as its request arrives and asks {@code handlerFor} for the
     * handler of each one established (a test that gives its connections handlers of their own, or counts them).
     */
    public static ChannelAcceptor admittingEach(java.util.function.Consumer<RdmaChannel> admitted,
                                                java.util.function.Function<RdmaChannel, ChannelHandler> handlerFor) {
        return new ChannelAcceptor() {
            @Override
            public void admit(RdmaChannel channel) {
                admitted.accept(channel);
            }

            @Override
            public ChannelHandler onAccepted(RdmaChannel channel) {
                return handlerFor.apply(channel);
            }
        };
    }

    /**
     * A connect from {@code client} to {@code to} on a thread of its own, for a fabric that stalls handshakes
     * ({@link FakeFabric#stallHandshakes}): the thread ends when the connect fails at its timeout, as it must.
     */
    public static Thread stalledConnect(RdmaTransport client, InetSocketAddress to) {
        Thread t = new Thread(() -> org.junit.jupiter.api.Assertions.assertThrows(FabricException.class,
                () -> client.connect(to, new Recorder())));
        t.start();
        return t;
    }

    /**
     * A connect whose handshake the fabric stalls ({@link #stalledConnect}), once {@code server} holds
     * {@code channels} channels with it: the request was accepted and waits, unfinished, in its backlog.
     */
    public static Thread stalledAndAccepted(RdmaTransport client, RdmaServer listening, RdmaTransport server,
                                            int channels) throws InterruptedException {
        Thread t = stalledConnect(client, listening.localAddress());
        await("request " + channels + " accepted", 5000, () -> server.channelCount() == channels);
        return t;
    }

    /** Closes every channel of {@code channels}. */
    public static void closeAll(java.util.Collection<RdmaChannel> channels) {
        channels.forEach(RdmaChannel::close);
    }

    public static InetSocketAddress serverAddress() {
        try {
            return new InetSocketAddress(InetAddress.getByAddress(new byte[] {10, 77, 0, 1}), 0);
        } catch (java.net.UnknownHostException e) {
            throw new AssertionError(e);
        }
    }

    /** A frame whose content is derived from (seq, size): the receiver can verify order and content. */
    public static byte[] payload(long seed, int seq, int size) {
        byte[] b = new byte[size];
        long x = seed * 0x9E3779B97F4A7C15L + seq * 0xBF58476D1CE4E5B9L + size;
        for (int i = 0; i < size; i++) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
            b[i] = (byte) x;
        }
        if (size >= 4) {
            ByteBuffer.wrap(b).putInt(0, seq);
        }
        return b;
    }

    public static long crc(ByteBuffer b) {
        CRC32 c = new CRC32();
        c.update(b.duplicate());
        return c.getValue();
    }

    public static long crc(byte[] b) {
        CRC32 c = new CRC32();
        c.update(b);
        return c.getValue();
    }

    /**
     * A recorder whose first frame keeps its completion loop inside the handler (inside a batch) until
     * {@code release}: what a busy loop does, made to order.
     */
    public static final class HoldingRecorder extends Recorder {
        public final java.util.concurrent.CountDownLatch inHandler = new java.util.concurrent.CountDownLatch(1);
        public final java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);

        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            super.onFrame(channel, frame);
            if (count() == 1) {
                inHandler.countDown();
                try {
                    release.await(10, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
    }

    /** Records what a channel's handler sees. */
    public static class Recorder implements ChannelHandler {
        public final List<Long> crcs = Collections.synchronizedList(new ArrayList<>());
        public final List<Integer> sizes = Collections.synchronizedList(new ArrayList<>());
        public final AtomicInteger writableEvents = new AtomicInteger();
        final AtomicInteger endOfBatch = new AtomicInteger();
        public final CompletableFuture<FabricException> closed = new CompletableFuture<>();
        final BlockingQueue<byte[]> frames = new LinkedBlockingQueue<>();
        volatile boolean keepFrames;
        volatile Thread callbackThread;
        public final List<String> threadViolations = Collections.synchronizedList(new ArrayList<>());

        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            checkThread();
            // sizes first: count() reads crcs, and a test that saw the count may read sizes at once
            int size = frame.remaining();
            sizes.add(size);
            crcs.add(crc(frame));
            if (keepFrames) {
                byte[] copy = new byte[frame.remaining()];
                frame.duplicate().get(copy);
                frames.add(copy);
            }
        }

        @Override
        public void onEndOfBatch(RdmaChannel channel) {
            checkThread();
            endOfBatch.incrementAndGet();
        }

        @Override
        public void onWritable(RdmaChannel channel) {
            writableEvents.incrementAndGet();
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
            closed.complete(cause);
        }

        private void checkThread() {
            Thread t = Thread.currentThread();
            if (callbackThread == null) {
                callbackThread = t;
            } else if (callbackThread != t) {
                threadViolations.add("callback on " + t.getName() + " after " + callbackThread.getName());
            }
        }

        public int count() {
            return crcs.size();
        }
    }

    public static void await(String what, long timeoutMillis, java.util.function.BooleanSupplier condition)
            throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.sleep(1);
        }
    }
}
