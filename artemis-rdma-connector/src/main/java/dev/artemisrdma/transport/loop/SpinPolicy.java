package dev.artemisrdma.transport.loop;

import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.config.TransportConfig;

/**
 * How long an idle completion loop busy-polls before it arms the completion channel and blocks: a window between 0
 * and {@code busyPollMicros} (but for the long probe below). Spinning saves a wake-up only when the next completion
 * comes within the window; otherwise it is a core burnt for nothing. {@code busyPollMode=fixed} always spins the
 * whole bound, {@code off} (like {@code busyPollMicros=0}) never spins; the default, {@code adaptive}, is described
 * here.
 *
 * <p><b>Why not the gap alone.</b> The window used to adapt only to single idle periods, after Linux KVM's halt
 * polling (Documentation/virt/kvm/halt-polling.rst): a gap shorter than the bound grew it, a longer one halved it.
 * That is sound for a vCPU, whose wake-up sources do not watch it back, and unsound for a ping-pong between two
 * loops (issue 24): the gap one end measures is the round trip plus the other end's wake-up, plus its own. One
 * wake-up longer than the bound and it feeds itself: the answer comes after the peer's wake-up, past this end's
 * window, so this end blocks too, and its next request reaches the peer after this end's wake-up, past the peer's
 * window. Both windows close, every round trip pays two wake-ups, every gap measured exceeds the bound again. No
 * window up to the bound leads out: one end must catch, once, a message the other's wake-up delayed.
 *
 * <p><b>The rate opens the window.</b> So the default watches the rate too: an average (1/8 weight) of the idle
 * periods that completions ended. While it is at most {@link #CONVERSATION_NANOS} (or 4 x the bound, when larger),
 * completions come at a request/reply pace (inflated gaps included), and the loop spins the whole bound after each.
 * Below that rate the gap-adapted window rules as before: an idle loop, whose only traffic is pings seconds apart (a
 * completion every 15 ms or so on a broker with 1,000 idle connections), blocks at once; a blocking wait's timeout
 * ends the conversation at once.
 *
 * <p><b>A long probe leads out of the trap.</b> After {@value #MISSES} whole-bound spins in a row that caught
 * nothing, the next idle period spins up to the conversation's bound (1 ms, or 4 x the bound when larger: past a
 * wake-up of most of a millisecond): it catches the message the peer's wake-up delayed and answers at once, so the
 * peer, spinning the bound too, catches that answer, and both ends spin from then on; a ping-pong whose round trip
 * fits the bound settles within a probe. Both ends of a ping-pong see the same rate, so they start trying together.
 *
 * <p><b>And stops when it does not pay.</b> Traffic at that rate whose answers come later than the bound anyway (a
 * peer that works longer than the bound to answer, a one-way stream a little sparser than the bound) would have the
 * loop spin the bound for nothing after every completion. So when the whole-bound spins still miss after the long
 * probe (2 more), or the long probe caught nothing, the loop backs off: the gap-adapted window (by then 0) rules for
 * 32 to 95 idle periods, then it tries again. The back-off's length is drawn at random: ends that backed off out of
 * step would otherwise stay out of step for ever, each trying while the other blocks. A whole-bound spin that
 * catches resets it all. Such traffic so costs a few percent of a core: with a 50 us bound, 8 % at gaps of 60 us
 * (where {@code fixed} spins 83 %), 4 % at 150 us, 2 % at 900 us. The long probe is the one spin longer than
 * {@code busyPollMicros} (at most one per 37 idle periods, while conversing only, and within the transport's
 * {@link SpinBudget}).
 *
 * <p>Alternatives weighed: spinning after a SEND is posted (the answer is expected within the bound) needs the
 * channels' post path to tell the loop, and does not help where it matters most: a broker's loop hands a request to
 * a broker thread and blocks before that thread posts the answer. Counting completions per fixed period needs a clock
 * read per completion or per period; the average of idle periods costs nothing the loop does not measure already.
 *
 * <p>Pure arithmetic on durations the loop measured: no clock, no thread, testable without timing. Used by one loop
 * thread only; {@link #window} may be read by monitoring (a racy read is harmless).
 */
final class SpinPolicy {

    /** Completions ending idle periods at least this often on average keep the loop spinning the whole bound. */
    static final long CONVERSATION_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    /** Full-window spins in a row that catch nothing before the long probe (and after it, the back-off). */
    static final int MISSES = 4;
    /** Full-window spins tried after a long probe that caught, before the loop backs off. */
    private static final int AFTER_PROBE = 2;
    private static final int BACKOFF_MIN = 32;
    private static final int BACKOFF_SPAN = 64;

    private final TransportConfig.BusyPollMode mode;
    private final long maxNanos;
    private final long startNanos;
    /** The conversation's bound on the average idle period. */
    private final long horizonNanos;
    /** What one idle period may weigh in the average: a long one ends a conversation, none is remembered for long. */
    private final long capNanos;
    /** The gap-adapted window (KVM's). */
    private long windowNanos;
    /** Average of the idle periods completions ended; capNanos: no conversation. */
    private long meanIdleNanos;
    /** Full-window spins in a row that caught nothing. */
    private int misses;
    /** Idle periods left before the full window is tried again. */
    private int backoffLeft;
    /** The next idle period spins up to the conversation's bound, past the peer's wake-up. */
    private boolean longProbe;
    /** The long probe ran since the last full-window spin that caught: the next run of misses backs off. */
    private boolean probed;
    private long random;

    /** @param maxNanos the upper bound ({@code busyPollMicros}); 0 never spins */
    SpinPolicy(long maxNanos) {
        this(maxNanos, TransportConfig.BusyPollMode.ADAPTIVE, System.nanoTime());
    }

    SpinPolicy(long maxNanos, TransportConfig.BusyPollMode mode) {
        this(maxNanos, mode, System.nanoTime() ^ System.identityHashCode(mode));
    }

    /** {@code seed}: of the back-off lengths (tests fix it). */
    SpinPolicy(long maxNanos, TransportConfig.BusyPollMode mode, long seed) {
        this.mode = mode;
        this.maxNanos = mode == TransportConfig.BusyPollMode.OFF ? 0 : Math.max(0, maxNanos);
        // a first window of an eighth of the bound (at least 1 us): three doublings from nothing to the bound
        this.startNanos = Math.min(this.maxNanos, Math.max(1_000, this.maxNanos / 8));
        this.horizonNanos = Math.max(CONVERSATION_NANOS, 4 * this.maxNanos); // at most 40 s: no overflow
        this.capNanos = 4 * horizonNanos;
        this.meanIdleNanos = capNanos;
        this.random = seed == 0 ? 0x9E3779B97F4A7C15L : seed;
    }

    /** How long the next idle period may spin before blocking; 0: block at once. */
    long window() {
        if (maxNanos == 0) {
            return 0;
        }
        if (mode == TransportConfig.BusyPollMode.FIXED) {
            return maxNanos;
        }
        if (fullWindow()) {
            return longProbe ? Math.max(maxNanos, horizonNanos) : maxNanos;
        }
        return windowNanos;
    }

    long max() {
        return maxNanos;
    }

    long start() {
        return startNanos;
    }

    /** Whether completions come at a request/reply pace (see the class comment). */
    boolean conversing() {
        return meanIdleNanos <= horizonNanos;
    }

    private boolean fullWindow() {
        return backoffLeft == 0 && meanIdleNanos <= horizonNanos;
    }

    /** A spin found a completion after {@code idleNanos}: the window is right for the traffic. */
    void caught(long idleNanos) {
        if (!adaptive()) {
            return;
        }
        boolean wasLong = fullWindow() && longProbe;
        if (backoffLeft > 0) {
            backoffLeft--;
        }
        average(idleNanos);
        if (wasLong) {
            // it caught what the peer's wake-up delayed: now a full window may catch the peer's next answer
            longProbe = false;
            probed = true;
            misses = MISSES - AFTER_PROBE;
        } else {
            misses = 0;
            probed = false;
        }
    }

    /**
     * An idle period that spinning did not catch ended after {@code idleNanos} (spin plus block): by a completion
     * ({@code woken}), or by the blocking wait's timeout (or a wake-up).
     */
    void missed(long idleNanos, boolean woken) {
        if (!adaptive()) {
            return;
        }
        boolean wasFull = fullWindow();
        boolean wasLong = wasFull && longProbe;
        if (backoffLeft > 0) {
            backoffLeft--;
        }
        if (woken) {
            average(idleNanos);
        } else {
            meanIdleNanos = capNanos; // no completion for a whole wait: the conversation is over
            misses = 0;
            backoffLeft = 0;
            longProbe = false;
            probed = false;
        }
        if (woken && idleNanos < maxNanos) {
            windowNanos = windowNanos < startNanos ? startNanos : Math.min(maxNanos, windowNanos * 2);
        } else if (windowNanos > 0) {
            windowNanos /= 2;
            if (windowNanos < startNanos) {
                windowNanos = 0;
            }
        }
        // a miss shorter than the window it had was not spun (the spin budget ran out): no evidence against spinning
        if (wasLong) {
            longProbe = false;
            probed = true;
            if (woken && idleNanos >= horizonNanos) {
                backOff(); // nothing came within the conversation's bound: no conversation to find
            }
        } else if (wasFull && woken && idleNanos >= maxNanos && ++misses >= MISSES) {
            if (probed) {
                backOff();
            } else {
                longProbe = true;
            }
        }
    }

    private void backOff() {
        misses = 0;
        probed = false;
        backoffLeft = BACKOFF_MIN + nextRandom(BACKOFF_SPAN);
    }

    private boolean adaptive() {
        return maxNanos > 0 && mode == TransportConfig.BusyPollMode.ADAPTIVE;
    }

    private void average(long idleNanos) {
        long idle = Math.min(Math.max(0, idleNanos), capNanos);
        meanIdleNanos += (idle - meanIdleNanos) / 8;
    }

    /** xorshift64: 0..bound-1 */
    private int nextRandom(int bound) {
        long x = random;
        x ^= x << 13;
        x ^= x >>> 7;
        x ^= x << 17;
        random = x;
        return (int) Math.floorMod(x, (long) bound);
    }
}
