package dev.artemisrdma.transport.loop;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The share of one core that all completion loops of a transport may spend busy-polling together, counted over
 * periods of {@value #PERIOD_MILLIS} ms: once a period's spinning reaches it, every loop blocks on its completion
 * channel until the next period (a completion still wakes it at once). It keeps many loops from spinning a small
 * host's few cores away from the broker's own threads: a loop's useful work is never limited, only its waiting.
 *
 * <p>Approximate by design: loops charge what they spun after each spin, and the period rolls over without a lock,
 * so a period may overshoot by the spins in flight (each at most {@code busyPollMicros}).
 */
public final class SpinBudget {

    static final long PERIOD_MILLIS = 100;
    /**
     * Percent of one core the loops of one transport may spin together, at most: one core, so however many loops a
     * broker runs, the other cores stay for its own threads, and a lone loop serving a latency-critical peer (which
     * spins up to all of a core between its completions) is never cut short.
     */
    static final int SHARE_PERCENT = 100;

    private final long periodNanos;
    private final long limitNanos;
    private final AtomicLong spent = new AtomicLong();
    private volatile long periodStart;
    /** Periods in which the budget ran out (a loop blocked for want of it). */
    private final AtomicLong exhausted = new AtomicLong();

    public SpinBudget() {
        this(TimeUnit.MILLISECONDS.toNanos(PERIOD_MILLIS), SHARE_PERCENT);
    }

    SpinBudget(long periodNanos, int sharePercent) {
        this.periodNanos = periodNanos;
        this.limitNanos = periodNanos * sharePercent / 100;
        this.periodStart = System.nanoTime();
    }

    /** Whether a loop may spin now ({@code now}: System.nanoTime()). */
    boolean allows(long now) {
        long start = periodStart;
        if (now - start >= periodNanos) {
            periodStart = now; // racing loops may both reset: either reading is a fresh period
            spent.set(0);
            return true;
        }
        return spent.get() < limitNanos;
    }

    /** A loop spun for {@code nanos}. */
    void charge(long nanos) {
        long after = spent.addAndGet(nanos);
        if (after >= limitNanos && after - nanos < limitNanos) {
            exhausted.incrementAndGet();
        }
    }

    /** Periods in which the loops used up the budget. */
    public long exhaustedPeriods() {
        return exhausted.get();
    }
}
