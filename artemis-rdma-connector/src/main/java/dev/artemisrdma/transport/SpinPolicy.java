package dev.artemisrdma.transport;

/**
 * How long an idle completion loop busy-polls before it arms the completion channel and blocks: a window that adapts
 * between 0 and {@code busyPollMicros} to whether spinning pays, after Linux KVM's halt polling
 * (Documentation/virt/kvm/halt-polling.rst). Spinning saves a wake-up only when the next completion comes within the
 * window; otherwise it is a core burnt for nothing.
 *
 * <ul>
 *   <li>After each idle period the loop reports how long it was idle (spinning plus blocked) and whether a completion
 *       ended it. Idle shorter than the upper bound, and not caught by the spin: a longer window would have caught
 *       it, so the window grows (from {@link #start} doubling up to the bound). Idle longer than the bound, or
 *       ended by the blocking wait's timeout: spinning could not have paid, so the window halves, and below
 *       {@link #start} it drops to 0 (block at once).</li>
 *   <li>A spin that found a completion changes nothing: the window fits the traffic.</li>
 * </ul>
 * So an idle loop, or one whose connections send less often than the bound, blocks at once; a loop under steady
 * load spins in the gaps between completions. Pure arithmetic on durations the loop measured: no clock, no thread,
 * testable without timing. Used by one loop thread only.
 */
final class SpinPolicy {

    private final long maxNanos;
    private final long startNanos;
    private long windowNanos;

    /** @param maxNanos the upper bound ({@code busyPollMicros}); 0 never spins */
    SpinPolicy(long maxNanos) {
        this.maxNanos = Math.max(0, maxNanos);
        // a first window of an eighth of the bound (at least 1 us): three doublings from nothing to the bound
        this.startNanos = Math.min(this.maxNanos, Math.max(1_000, this.maxNanos / 8));
    }

    /** How long the next idle period may spin before blocking; 0: block at once. */
    long window() {
        return windowNanos;
    }

    long max() {
        return maxNanos;
    }

    long start() {
        return startNanos;
    }

    /** A spin found a completion: the window is right for the traffic. */
    void caught() {
        // nothing to learn: spinning paid
    }

    /**
     * An idle period that spinning did not catch ended after {@code idleNanos} (spin plus block): by a completion
     * ({@code woken}), or by the blocking wait's timeout.
     */
    void missed(long idleNanos, boolean woken) {
        if (maxNanos == 0) {
            return;
        }
        if (woken && idleNanos < maxNanos) {
            windowNanos = windowNanos < startNanos ? startNanos : Math.min(maxNanos, windowNanos * 2);
        } else if (windowNanos > 0) {
            windowNanos /= 2;
            if (windowNanos < startNanos) {
                windowNanos = 0;
            }
        }
    }
}
