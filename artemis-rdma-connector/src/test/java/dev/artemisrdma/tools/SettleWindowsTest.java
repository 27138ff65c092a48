package dev.artemisrdma.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The windows of a settled run: the warm-up's count, rehearsals of iters until the JIT is quiet, one measured. */
class SettleWindowsTest {

    private static final long SECOND = 1_000_000_000L;

    @Test
    void rehearsalsGoOnUntilAWindowWentByWithTheJitQuietThenOneIsMeasured() {
        SettleWindows windows = new SettleWindows(500, 1000, new JitSettle(60));
        assertEquals(0, windows.begin());
        assertEquals(500, windows.end(), "the warm-up's count");
        assertFalse(windows.measuring());

        assertFalse(windows.ended(0, 0, SECOND, 400), "the warm-up compiled 400 ms of its second");
        assertEquals(500, windows.begin());
        assertEquals(1500, windows.end());
        assertFalse(windows.measuring(), "a rehearsal follows a busy window");

        assertFalse(windows.ended(SECOND, 400, 2 * SECOND, 405), "5 ms: quiet");
        assertEquals(1500, windows.begin());
        assertEquals(2500, windows.end());
        assertTrue(windows.measuring(), "the window after a quiet one is measured");

        assertTrue(windows.ended(2 * SECOND, 405, 3 * SECOND, 405), "the measured window's ack ends the run");
    }

    @Test
    void theLimitOpensTheMeasuredWindowHoweverBusyTheJit() {
        JitSettle settle = new JitSettle(2);
        SettleWindows windows = new SettleWindows(100, 100, settle);
        assertFalse(windows.ended(0, 0, SECOND, 500));
        assertFalse(windows.measuring());
        assertFalse(windows.ended(SECOND, 500, 3 * SECOND, 1500), "past the 2 s limit");
        assertTrue(windows.measuring());
        assertEquals(300, windows.end(), "warm-up 100, one rehearsal of 100, the measured 100");
        assertTrue(settle.line().contains("still compiling at the limit"), settle.line());
    }

    @Test
    void aWarmUpOfNoneIsOneFrameSoThatTheFirstWindowHasAnEnd() {
        SettleWindows windows = new SettleWindows(0, 50, new JitSettle(10));
        assertEquals(1, windows.end());
        windows.ended(0, 0, SECOND, 0);
        assertEquals(51, windows.end());
    }
}
