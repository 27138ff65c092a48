package dev.artemisrdma.transport.loop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.config.TransportConfig;

/** The spin window's arithmetic, fed with the idle periods a loop would measure (no clock, no thread). */
class SpinPolicyTest {

    private static final long MAX = TimeUnit.MICROSECONDS.toNanos(50);
    private static final long TIMEOUT = TimeUnit.MILLISECONDS.toNanos(100);

    @Test
    void anIdleLoopNeverSpins() {
        SpinPolicy p = new SpinPolicy(MAX);
        assertEquals(0, p.window(), "a new loop blocks at once");
        for (int i = 0; i < 100; i++) {
            p.missed(TIMEOUT, false);
            assertEquals(0, p.window());
        }
    }

    @Test
    void steadyShortGapsGrowTheWindowUpToBusyPollMicrosAndNoFurther() {
        SpinPolicy p = new SpinPolicy(MAX);
        long gap = TimeUnit.MICROSECONDS.toNanos(30);
        p.missed(gap, true);
        assertEquals(p.start(), p.window(), "a wake-up shorter than the bound: spinning would have caught it");
        long previous = p.window();
        int steps = 0;
        while (p.window() < gap) {
            p.missed(gap, true);
            assertTrue(p.window() > previous, "grows while it still misses");
            previous = p.window();
            assertTrue(++steps < 10);
        }
        for (int i = 0; i < 100; i++) {
            p.caught(gap); // the window now catches every gap: it stays
            assertEquals(previous, p.window());
        }
        for (int i = 0; i < 100; i++) {
            p.missed(MAX - 1, true);
            assertTrue(p.window() <= MAX, "busyPollMicros bounds the window: " + p.window());
        }
        assertEquals(MAX, p.window());
    }

    @Test
    void gapsLongerThanTheBoundAndTimeoutsShrinkItToBlockingAtOnce() {
        // gaps beyond the conversation's pace (or timeouts): the gap-adapted window halves at each, as it always did
        long sparse = SpinPolicy.CONVERSATION_NANOS * 5;
        for (boolean woken : new boolean[] {true, false}) {
            SpinPolicy p = new SpinPolicy(MAX);
            for (int i = 0; i < 10; i++) {
                p.missed(1_000, true);
            }
            assertEquals(MAX, p.window());
            int steps = 0;
            while (p.window() > 0) {
                long before = p.window();
                p.missed(woken ? sparse : TIMEOUT, woken);
                assertTrue(p.window() < before);
                assertTrue(++steps <= 4, "from the bound to 0 in at most 4 halvings");
            }
        }
    }

    @Test
    void gapsJustOverTheBoundAtAConversationsPaceAreTriedThenLeftToBlocking() {
        // the trap's signature (issue 24): gaps over the bound at a request/reply pace, which may be a peer's
        // wake-up. The whole bound is tried, then one long probe (which catches the gap), then the loop backs off
        // and blocks; so it goes on, spinning a small part of what busyPollMode=fixed would
        long gap = 3 * MAX;
        SpinPolicy p = new SpinPolicy(MAX, TransportConfig.BusyPollMode.ADAPTIVE, 42);
        for (int i = 0; i < 30; i++) {
            p.missed(gap, true);
        }
        assertTrue(p.conversing());
        int full = 0;
        int blocked = 0;
        int longProbes = 0;
        long spun = 0;
        int periods = 10_000;
        for (int i = 0; i < periods; i++) {
            long window = p.window();
            if (window == MAX) {
                full++;
            } else if (window > MAX) {
                longProbes++;
            } else {
                assertEquals(0, window, "backing off, the loop blocks at once");
                blocked++;
            }
            if (window >= gap) {
                spun += gap;
                p.caught(gap);
            } else {
                spun += window;
                p.missed(gap + (window == 0 ? MAX : 0), true);
            }
        }
        assertTrue(full > 0 && blocked > 0 && longProbes > 0, full + " full, " + longProbes + " long, " + blocked
                + " blocked");
        assertTrue(longProbes <= full / SpinPolicy.MISSES, "a long probe after every run of full misses at most");
        assertTrue(spun * 6 < (long) periods * MAX, "spun " + spun + " ns, fixed would have spun "
                + (long) periods * MAX);
        p.missed(TIMEOUT, false);
        assertTrue(!p.conversing());
        assertEquals(0, p.window(), "a timeout ends the conversation");
    }

    @Test
    void fixedAlwaysSpinsTheBoundAndOffNever() {
        SpinPolicy fixed = new SpinPolicy(MAX, TransportConfig.BusyPollMode.FIXED);
        SpinPolicy off = new SpinPolicy(MAX, TransportConfig.BusyPollMode.OFF);
        SpinPolicy zero = new SpinPolicy(0, TransportConfig.BusyPollMode.FIXED);
        for (int i = 0; i < 100; i++) {
            assertEquals(MAX, fixed.window());
            assertEquals(0, off.window());
            assertEquals(0, zero.window(), "busyPollMicros=0 never spins, whatever the mode");
            for (SpinPolicy p : new SpinPolicy[] {fixed, off, zero}) {
                if (i % 2 == 0) {
                    p.missed(i % 4 == 0 ? TIMEOUT : 1_000, i % 4 != 0);
                } else {
                    p.caught(1_000);
                }
            }
        }
    }

    @Test
    void busyPollMicrosZeroNeverSpins() {
        SpinPolicy p = new SpinPolicy(0);
        for (int i = 0; i < 10; i++) {
            p.missed(1, true);
            assertEquals(0, p.window());
        }
    }

    @Test
    void theBudgetStopsSpinningForTheRestOfItsPeriod() {
        long period = TimeUnit.MILLISECONDS.toNanos(100);
        long t0 = System.nanoTime();
        SpinBudget budget = new SpinBudget(period, 50);
        assertTrue(budget.allows(t0));
        budget.charge(period / 4);
        assertTrue(budget.allows(t0), "a quarter of the period spun, half allowed");
        budget.charge(period / 4);
        assertFalse(budget.allows(t0), "half of the period spun: no more in this period");
        assertEquals(1, budget.exhaustedPeriods());
        assertTrue(budget.allows(t0 + 2 * period), "a new period, a new budget");
        assertEquals(1, budget.exhaustedPeriods());
    }
}
