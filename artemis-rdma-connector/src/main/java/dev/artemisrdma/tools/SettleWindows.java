package dev.artemisrdma.tools;

/**
 * The windows of a transport client's run, by message number (a ping-pong's round trips, a stream's frames): the
 * first is the warm-up's count (at least one message), each later one {@code iters} long, so every window, rehearsal
 * or measured, runs the same code. A ping-pong's window ends with its last answer; a settled stream's when the
 * server acknowledges its last (marked) frame, so each drains the pipeline the same way. After a rehearsal the next
 * window is measured once {@link JitSettle} says the JIT went quiet (at once without {@code --settle}, or when its
 * limit passed); the run ends with the measured window.
 *
 * <p>Not thread-safe: a client calls it from its completion-loop callbacks (a stream under its own lock).
 */
final class SettleWindows {

    private final long iters;
    private final JitSettle settle;
    /** Messages before the current window. */
    private long begin;
    /** The message that ends the current window. */
    private long end;
    private boolean measuring;

    SettleWindows(int warmup, int iters, JitSettle settle) {
        this.iters = iters;
        this.settle = settle;
        this.end = Math.max(1, warmup);
    }

    /** Messages before the current window began. */
    long begin() {
        return begin;
    }

    /** The number of the message that ends the current window (a stream's marked frame). */
    long end() {
        return end;
    }

    /** Whether the current window is the measured one. */
    boolean measuring() {
        return measuring;
    }

    /**
     * The current window ended ({@link JitTime#millis} and the clock at both ends): true when that was the measured
     * window and the run is done; else the next window begins.
     */
    boolean ended(long startNanos, long startJitMillis, long endNanos, long endJitMillis) {
        if (measuring) {
            return true;
        }
        measuring = settle.settled(startNanos, startJitMillis, endNanos, endJitMillis);
        begin = end;
        end += iters;
        return false;
    }
}
