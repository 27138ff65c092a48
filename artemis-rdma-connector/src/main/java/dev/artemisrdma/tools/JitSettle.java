package dev.artemisrdma.tools;

import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * Decides when a warm-up is done: once a whole window of round trips went by with the JIT quiet (its compiler threads
 * busy at most 1 % of the window, {@link #QUIET_SHARE}), or when the limit has passed. Under the lab's emulation a
 * fresh client JVM's C2 compiled for 9.1 s (all compiler threads) inside an 8.8 s measured window after a warm-up of
 * 10,000 round trips, its compiler threads taking the CPUs the busy-polling ends need. ib_send_lat, a C program, has
 * nothing to compile. A broker runs for days: its steady state is what a latency comparison should measure, and
 * {@link JitTime} shows what compiling is left in the window either way.
 *
 * <p>Not thread-safe: one client's completion-loop thread calls it.
 */
final class JitSettle {

    /** The compiler threads' share of a window that counts as quiet. */
    static final double QUIET_SHARE = 0.01;
    /** The least compiling that counts as compiling: one clock tick of thread CPU. */
    static final long TICK_MILLIS = 10;

    private final long limitNanos;
    private long began = -1;
    private long waitedNanos;
    private boolean timedOut;
    private long lastWindowJit = -1;

    /** {@code limitSeconds}: how long the warm-up may go on for the JIT; 0 ends it after its count (no settling). */
    JitSettle(int limitSeconds) {
        this.limitNanos = TimeUnit.SECONDS.toNanos(limitSeconds);
    }

    /**
     * A warm-up window ended ({@link JitTime#millis} at both ends): true when the next window may be measured.
     */
    boolean settled(long startNanos, long startJitMillis, long endNanos, long endJitMillis) {
        if (limitNanos == 0) {
            return true;
        }
        if (began < 0) {
            began = startNanos;
        }
        waitedNanos = endNanos - began;
        if (startJitMillis < 0 || endJitMillis < 0) {
            return true; // a JVM that does not tell: nothing to wait for
        }
        // a compiler thread that exited takes its CPU along: a fall is no compiling either
        lastWindowJit = Math.max(0, endJitMillis - startJitMillis);
        long windowMillis = TimeUnit.NANOSECONDS.toMillis(endNanos - startNanos);
        if (lastWindowJit <= Math.max(TICK_MILLIS, (long) (windowMillis * QUIET_SHARE))) {
            return true;
        }
        if (waitedNanos > limitNanos) {
            timedOut = true;
            return true;
        }
        return false;
    }

    /** The line the client prints: how long the warm-up went on for the JIT, and whether it went quiet. */
    String line() {
        if (limitNanos == 0) {
            return "rdmaperf: settle=off";
        }
        return String.format(Locale.ROOT, "rdmaperf: settle_s=%.1f (%s; the last warm-up window compiled %d ms)",
                waitedNanos / 1e9, timedOut ? "the JIT was still compiling at the limit" : "the JIT went quiet",
                lastWindowJit);
    }
}
