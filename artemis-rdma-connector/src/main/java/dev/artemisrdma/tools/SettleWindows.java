package dev.artemisrdma.tools;

/**
 * The windows of a settled transport stream, by frame number: the first is the warm-up's count (at least one frame),
 * each later one {@code iters} long. A window ends when the server acknowledges its last (marked) frame, so every
 * window, rehearsal or measured, pumps the same code and drains the pipeline the same way. After a rehearsal the
 * next window is measured once {@link JitSettle} says the JIT went quiet (or its limit passed); the run ends with
 * the measured window's acknowledgement.
 *
 * <p>Not thread-safe: the stream client calls it under its own lock.
 */
final class StreamWindows {

    private final long iters;
    private final JitSettle settle;
    /** Frames written before the current window. */
    private long begin;
    /** The frame that ends the current window. */
    private long end;
    private boolean measuring;

    StreamWindows(int warmup, int iters, JitSettle settle) {
        this.iters = iters;
        this.settle = settle;
        this.end = Math.max(1, warmup);
    }

    /** Frames written before the current window began. */
    long begin() {
        return begin;
    }

    /** The number of the frame that ends the current window (the marked one). */
    long end() {
        return end;
    }

    /** Whether the current window is the measured one. */
    boolean measuring() {
        return measuring;
    }

    /**
     * The current window's last frame was acknowledged ({@link JitTime#millis} and the clock at both ends): true
     * when that was the measured window and the run is done; else the next window begins.
     */
    boolean acknowledged(long startNanos, long startJitMillis, long endNanos, long endJitMillis) {
        if (measuring) {
            return true;
        }
        measuring = settle.settled(startNanos, startJitMillis, endNanos, endJitMillis);
        begin = end;
        end += iters;
        return false;
    }
}
