package dev.artemisrdma.it.wire;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.verbs.VerbsFabric;

/**
 * The client half of {@link WireSoakLabTest}, on host B: {@code FRAMES} frames of random sizes (1 B to 64 KiB, one in
 * 50 up to 1 MiB, so fragmented), each carrying its sequence number and content derived from it, over one
 * connection to the echoing server on A, at most {@code WINDOW} unanswered; every echo is checked in order and byte
 * for byte. Prints {@code SOAK sent=.. received=.. bad=.. seconds=.. bytes=..} (or {@code FAILED ...}).
 */
public final class WireSoakClientMain {

    private static final int WINDOW = 64;

    private WireSoakClientMain() {
    }

    public static void main(String[] args) throws Exception {
        InetSocketAddress to = new InetSocketAddress(args[0], Integer.parseInt(args[1]));
        int frames = Integer.parseInt(args[2]);
        long seed = Long.parseLong(args[3]);
        Semaphore window = new Semaphore(WINDOW);
        CountDownLatch done = new CountDownLatch(frames);
        AtomicLong bad = new AtomicLong();
        AtomicLong bytes = new AtomicLong();
        long[] nextExpected = {0};
        ChannelHandler checker = new ChannelHandler() {
            @Override
            public void onFrame(RdmaChannel channel, ByteBuffer frame) {
                long seq = nextExpected[0]++;
                if (!matches(frame, seq, seed)) {
                    if (bad.incrementAndGet() <= 5) {
                        System.out.println("PROBLEM echo " + seq + " (" + frame.remaining() + " bytes) is not frame "
                                + seq + " as sent");
                    }
                }
                bytes.addAndGet(frame.remaining());
                window.release();
                done.countDown();
            }

            @Override
            public void onClosed(RdmaChannel channel, FabricException cause) {
                if (cause != null) {
                    System.out.println("CONNECTION FAILED " + cause.getMessage());
                }
            }
        };
        long start = System.nanoTime();
        try (VerbsFabric fabric = new VerbsFabric();
             RdmaTransport transport = RdmaTransport.create(fabric, TransportConfig.defaults())) {
            RdmaChannel channel = transport.connect(to, checker);
            for (int i = 0; i < frames; i++) {
                if (!window.tryAcquire(60, TimeUnit.SECONDS)) {
                    System.out.println("FAILED no echo for 60 s after " + (frames - done.getCount()) + " frames");
                    return;
                }
                channel.write(ByteBuffer.wrap(frame(i, seed)), true);
                if (i % 5_000 == 4_999) {
                    System.out.println("PROGRESS " + (i + 1));
                }
            }
            boolean all = done.await(300, TimeUnit.SECONDS);
            double seconds = (System.nanoTime() - start) / 1e9;
            System.out.printf("SOAK sent=%d received=%d bad=%d seconds=%.1f bytes=%d%n", frames,
                    frames - done.getCount(), bad.get(), seconds, bytes.get());
            if (!all) {
                System.out.println("FAILED " + done.getCount() + " echoes missing");
            }
            channel.close();
        }
    }

    /** Frame {@code seq}: its size and content derived from (seed, seq), its sequence number in its first 8 bytes. */
    static byte[] frame(long seq, long seed) {
        SplittableRandom r = new SplittableRandom(seed * 31 + seq);
        int size = r.nextInt(50) == 0 ? 65_536 + r.nextInt(1 << 20) : 8 + r.nextInt(65_536);
        byte[] b = new byte[size];
        ByteBuffer.wrap(b).putLong(seq);
        for (int i = 8; i < size; i++) {
            b[i] = (byte) r.nextInt(256);
        }
        return b;
    }

    static boolean matches(ByteBuffer frame, long seq, long seed) {
        byte[] expected = frame(seq, seed);
        return frame.remaining() == expected.length && frame.equals(ByteBuffer.wrap(expected));
    }
}
