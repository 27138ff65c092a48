package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

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
            p.caught(); // the window now catches every gap: it stays
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
        for (boolean woken : new boolean[] {true, false}) {
            SpinPolicy p = new SpinPolicy(MAX);
            for (int i = 0; i < 10; i++) {
                p.missed(1_000, true);
            }
            assertEquals(MAX, p.window());
            int steps = 0;
            while (p.window() > 0) {
                long before = p.window();
                p.missed(woken ? MAX + 1 : TIMEOUT, woken);
                assertTrue(p.window() < before);
                assertTrue(++steps <= 4, "from the bound to 0 in at most 4 halvings");
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
