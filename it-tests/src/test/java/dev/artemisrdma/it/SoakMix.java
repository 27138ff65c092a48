package dev.artemisrdma.it;

import java.nio.ByteBuffer;
import java.util.SplittableRandom;

/**
 * The soaks' traffic, a pure function of (seed, sequence number), so that a receiver can check size, order and
 * content of millions of messages without anyone keeping them: message {@code seq}'s size comes from a hash of
 * the two, and so does its content (8 header bytes hashed from the sequence number, then a window of a seeded
 * random pattern whose offset also depends on it). A lost, duplicated, reordered, truncated or corrupted message
 * shows up as a mismatch at the first message it touches.
 *
 * <p>Sizes: 95 % uniform in 1 B..2 KiB, 5 % log-uniform in 2 KiB..1 MiB, and exactly 16 MiB at {@code giants}
 * sequence numbers spread evenly through the run.
 */
public final class SoakMix {

    public static final int SMALL_MAX = 2 * 1024;
    public static final int LARGE_MAX = 1024 * 1024;
    public static final int GIANT = 16 * 1024 * 1024;
    private static final int HEADER = Long.BYTES;
    private static final int OFFSETS = 1024 * 1024;

    private final long seed;
    private final long count;
    private final int giants;
    /** Shared by every stream made with the same seed; never written after construction. */
    private final ByteBuffer pattern;

    public SoakMix(long seed, long count, int giants) {
        if (count < 1 || giants < 0 || giants >= count) {
            throw new IllegalArgumentException("count " + count + " must be at least 1 and above giants " + giants);
        }
        this.seed = seed;
        this.count = count;
        this.giants = giants;
        byte[] bytes = new byte[GIANT + OFFSETS];
        new SplittableRandom(seed).nextBytes(bytes);
        this.pattern = ByteBuffer.wrap(bytes).asReadOnlyBuffer();
    }

    public long count() {
        return count;
    }

    /** The size of message {@code seq}. */
    public int size(long seq) {
        if (isGiant(seq)) {
            return GIANT;
        }
        long h = mix(seed ^ (seq * 0x9E3779B97F4A7C15L));
        if ((h & 0xFFFF) < 0.95 * 0x10000) {
            return 1 + (int) ((h >>> 16) % SMALL_MAX);
        }
        double u = (h >>> 11) * 0x1.0p-53;
        long size = Math.round(SMALL_MAX * Math.pow((double) LARGE_MAX / SMALL_MAX, u));
        return (int) Math.max(SMALL_MAX + 1, Math.min(LARGE_MAX, size));
    }

    /** True for the few 16 MiB messages: at count/(giants+1), 2*count/(giants+1), ... */
    public boolean isGiant(long seq) {
        if (giants == 0) {
            return false;
        }
        long step = count / (giants + 1);
        return seq > 0 && seq % step == 0 && seq / step <= giants;
    }

    /** Writes message {@code seq} (exactly {@link #size} bytes) at {@code dst}'s position. */
    public void fill(ByteBuffer dst, long seq) {
        int size = size(seq);
        long header = header(seq);
        for (int i = 0; i < Math.min(HEADER, size); i++) {
            dst.put((byte) (header >>> (56 - 8 * i)));
        }
        if (size > HEADER) {
            dst.put(window(seq, size - HEADER));
        }
    }

    /**
     * Null when {@code message} (position to limit) is exactly message {@code seq}, else what is wrong with it.
     * Does not move {@code message}'s position.
     */
    public String check(ByteBuffer message, long seq) {
        int size = size(seq);
        int got = message.remaining();
        if (got != size) {
            return "message " + seq + ": " + got + " bytes instead of " + size;
        }
        long header = header(seq);
        int p = message.position();
        for (int i = 0; i < Math.min(HEADER, size); i++) {
            if (message.get(p + i) != (byte) (header >>> (56 - 8 * i))) {
                return "message " + seq + " (" + size + " bytes): header byte " + i
                        + " differs (out of order, or another message's content)";
            }
        }
        if (size > HEADER) {
            int at = message.slice(p + HEADER, size - HEADER).mismatch(window(seq, size - HEADER));
            if (at >= 0) {
                return "message " + seq + " (" + size + " bytes): content differs at byte " + (HEADER + at);
            }
        }
        return null;
    }

    /** The sum of the sizes of messages [0, count). */
    public long totalBytes() {
        long sum = 0;
        for (long seq = 0; seq < count; seq++) {
            sum += size(seq);
        }
        return sum;
    }

    private long header(long seq) {
        return mix(seed * 31 + seq);
    }

    private ByteBuffer window(long seq, int length) {
        int offset = (int) ((mix(seq ^ ~seed) >>> 1) % OFFSETS);
        return pattern.slice(offset, length);
    }

    /** SplitMix64's finaliser: a cheap, well-spread 64-bit hash. */
    private static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }
}
