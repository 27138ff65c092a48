package dev.artemisrdma.tools;

import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * Ends a warm-up when the JIT has gone quiet: at most {@link #QUIET_MILLIS} of compiler-thread CPU in each of
 * {@link #QUIET_WINDOWS} seconds in a row, or when the limit has passed. Under the lab's emulation a fresh client
 * JVM's C2 compiled for 9.1 s (finished compilations, all compiler threads) inside an 8.8 s measured window after an
 * iteration-count warm-up, its compiler threads taking the CPUs the busy-polling ends need; and one quiet second by
 * the JVM's own count was followed by 0.5-1.5 s more, since a compilation counts there only when it ends. ib_send_lat,
 * a C program, has nothing to compile. A broker runs for days: its steady state is what a latency comparison should
 * measure, and {@link JitTime} shows what compiling is left in the window either way.
 *
 * <p>Not thread-safe: one client's completion-loop thread calls it.
 */
final class JitSettle {

    /** Compiling in one second that counts as quiet: one clock tick of the compiler threads' CPU (1 %). */
    static final long QUIET_MILLIS = 10;
    /** Quiet seconds in a row that end the warm-up. */
    static final int QUIET_WINDOWS = 3;
    private static final long WINDOW_NANOS = TimeUnit.SECONDS.toNanos(1);

    private final long limitNanos;
    private long began = -1;
    private long windowStart;
    private long windowJit;
    private int quietWindows;
    private boolean timedOut;
    private long waitedNanos;

    /** {@code limitSeconds}: how long the warm-up may go on for the JIT; 0 ends it at once (no settling). */
    JitSettle(int limitSeconds) {
        this.limitNanos = TimeUnit.SECONDS.toNanos(limitSeconds);
    }

    /** Called as the warm-up goes on, once its count is reached: true when measuring may start. */
    boolean settled(long now) {
        if (limitNanos == 0) {
            return true;
        }
        if (began < 0) {
            began = now;
            windowStart = now;
            windowJit = JitTime.millis();
            return windowJit < 0; // a JVM that does not tell: nothing to wait for
        }
        if (now - windowStart < WINDOW_NANOS) {
            return false;
        }
        waitedNanos = now - began;
        if (waitedNanos > limitNanos) {
            timedOut = true;
            return true;
        }
        long jit = JitTime.millis();
        // a compiler thread that exited takes its CPU along: a fall is no compiling either
        quietWindows = jit - windowJit <= QUIET_MILLIS ? quietWindows + 1 : 0;
        windowStart = now;
        windowJit = jit;
        return quietWindows >= QUIET_WINDOWS;
    }

    /** The line the client prints: how long the warm-up waited for the JIT, and whether it went quiet. */
    String line() {
        if (limitNanos == 0) {
            return "rdmaperf: settle=off";
        }
        return String.format(Locale.ROOT, "rdmaperf: settle_s=%.1f (%s)", waitedNanos / 1e9,
                timedOut ? "the JIT was still compiling at the limit" : "the JIT went quiet");
    }
}
