package dev.artemisrdma.transport.loop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.config.TransportConfig;

/**
 * Issue 24's trap: in a ping-pong both ends are completion loops, so the idle period one end measures includes the
 * other end's wake-up (and its own). Two {@link SpinPolicy} objects are driven by a simulated clock (no thread, no
 * sleep) exactly as {@link CompletionLoop#run} drives one: each idle period ends caught by the spin, or missed
 * (blocked, then woken by the completion, which costs the loop's wake-up latency).
 */
class SpinPolicyPingPongTest {

    private static final long US = TimeUnit.MICROSECONDS.toNanos(1);
    private static final long MAX = 50 * US;

    /** One end of the ping-pong: its policy, its wake-up latency, and what it did. */
    private static final class End {
        final SpinPolicy policy;
        final long wakeUpNanos;
        long processNanos;
        long idleSince;
        long caught;
        long missed;
        long spinNanos;

        End(long wakeUpNanos, long processNanos, long seed) {
            this.policy = new SpinPolicy(MAX, TransportConfig.BusyPollMode.ADAPTIVE, seed);
            this.wakeUpNanos = wakeUpNanos;
            this.processNanos = processNanos;
        }

        /** A completion arrives at {@code arrival}: returns when the loop has handled it and posted the answer. */
        long receive(long arrival) {
            long window = policy.window();
            long gap = arrival - idleSince;
            long handled;
            if (window > 0 && gap <= window) {
                caught++;
                spinNanos += gap;
                policy.caught(gap);
                handled = arrival;
            } else {
                missed++;
                spinNanos += window;
                handled = arrival + wakeUpNanos; // blocked: the event wakes the thread this much later
                policy.missed(handled - idleSince, true);
            }
            idleSince = handled + processNanos; // the answer is posted, the loop is idle again
            return idleSince;
        }
    }

    /** Runs {@code roundTrips} ping-pongs over a link of one-way latency {@code wireNanos}; returns the clock. */
    private static long run(End a, End b, long wireNanos, int roundTrips, long clock) {
        long t = clock;
        for (int i = 0; i < roundTrips; i++) {
            t = b.receive(t + wireNanos); // a's request reaches b, which answers
            t = a.receive(t + wireNanos); // b's answer reaches a, which sends the next request
        }
        return t;
    }

    @Test
    void twoLoopsWhoseGapsIncludeEachOthersWakeUpsConvergeToSpinningWhenTheirRoundTripFitsTheBound() {
        // wake-ups above the bound (the lab's, or a loaded host's), a round trip well inside it when both spin:
        // 2 x 5 us on the wire + 2 x 2 us of work = 14 us < 50 us
        End a = new End(80 * US, 2 * US, 1);
        End b = new End(120 * US, 2 * US, 2);
        long wire = 5 * US;
        long t = run(a, b, wire, 2_000, 0);
        long aCaught = a.caught;
        long bCaught = b.caught;
        long start = t;
        int measured = 10_000;
        t = run(a, b, wire, measured, t);
        long perRoundTrip = (t - start) / measured;
        assertEquals(MAX, a.policy.window(), "a's window did not open: " + a.caught + " caught, " + a.missed
                + " missed");
        assertEquals(MAX, b.policy.window(), "b's window did not open: " + b.caught + " caught, " + b.missed
                + " missed");
        assertEquals(measured, a.caught - aCaught, "a's spins catch every answer once both spin");
        assertEquals(measured, b.caught - bCaught, "b's spins catch every request once both spin");
        assertTrue(perRoundTrip <= 14 * US, "the round trip is the wire's and the work's, no wake-up: "
                + perRoundTrip + " ns");
    }

    @Test
    void whenTheRoundTripDoesNotFitTheBoundTheyBlockAndBurnLittle() {
        // b takes 400 us to answer: no window up to the bound catches it, and spinning must not become the habit
        End a = new End(80 * US, 2 * US, 1);
        End b = new End(80 * US, 400 * US, 2);
        long wire = 5 * US;
        long t = run(a, b, wire, 2_000, 0);
        long spun = a.spinNanos + b.spinNanos;
        long start = t;
        t = run(a, b, wire, 10_000, t);
        double share = (double) (a.spinNanos + b.spinNanos - spun) / (2.0 * (t - start));
        assertTrue(share < 0.02, "the two loops spun " + share * 100 + " % of their time for nothing");
    }

    @Test
    void endsThatBackedOffOutOfStepStillMeetOnceTheRoundTripFits() {
        // a slow phase (b answers after 400 us) has both ends back off, each on its own schedule; then b answers at
        // once: for every pair of seeds they must find each other, each trying while the other does
        long wire = 5 * US;
        for (long seed = 1; seed <= 100; seed++) {
            End a = new End(80 * US, 2 * US, seed);
            End b = new End(120 * US, 400 * US, seed * 7919);
            long t = run(a, b, wire, 1_000 + (int) seed, 0);
            b.processNanos = 2 * US;
            int roundTrips = 0;
            int caughtInARow = 0;
            while (caughtInARow < 100) {
                long aCaught = a.caught;
                long bCaught = b.caught;
                t = run(a, b, wire, 1, t);
                caughtInARow = a.caught > aCaught && b.caught > bCaught ? caughtInARow + 1 : 0;
                assertTrue(++roundTrips < 5_000, "seed " + seed + ": not converged in " + roundTrips
                        + " round trips");
            }
            assertEquals(MAX, a.policy.window());
            assertEquals(MAX, b.policy.window());
        }
    }

    @Test
    void rarePingsOnIdleConnectionsNeverOpenTheWindow() {
        // 1,000 idle connections pinging every 30 s: a completion every 15 ms or so on the broker's loop, the odd
        // one right after another (a ping and its answer's send completion)
        SpinPolicy p = new SpinPolicy(MAX);
        long spun = 0;
        for (int i = 0; i < 10_000; i++) {
            long gap = i % 7 == 0 ? 5 * US : TimeUnit.MILLISECONDS.toNanos(15);
            long window = p.window();
            if (window > 0 && gap <= window) {
                spun += gap;
                p.caught(gap);
            } else {
                spun += window;
                p.missed(gap + 20 * US, true);
            }
        }
        assertTrue(spun < TimeUnit.MILLISECONDS.toNanos(10), "spun " + spun + " ns over 150 s of idle pings");
    }
}
