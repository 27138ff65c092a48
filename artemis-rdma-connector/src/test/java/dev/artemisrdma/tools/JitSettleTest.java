package dev.artemisrdma.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** RdmaPerf's warm-up that waits for the JIT ({@code --settle}) and the jit_ms line; its options: PerfOptionsTest. */
class JitSettleTest {

    private static final long SECOND = 1_000_000_000L;

    @Test
    void withoutALimitTheWarmUpEndsAtItsCount() {
        JitSettle off = new JitSettle(0);
        assertTrue(off.settled(0, 0, SECOND, 5000), "however busy the JIT");
        assertEquals("rdmaperf: settle=off", off.line());
    }

    @Test
    void aWindowWithTheJitQuietEndsTheWarmUp() {
        JitSettle settle = new JitSettle(60);
        long t0 = 1_000 * SECOND;
        assertFalse(settle.settled(t0, 0, t0 + 4 * SECOND, 900), "900 ms of compiling in 4 s");
        assertFalse(settle.settled(t0 + 4 * SECOND, 900, t0 + 8 * SECOND, 950), "50 ms in 4 s: more than 1 %");
        assertTrue(settle.settled(t0 + 8 * SECOND, 950, t0 + 12 * SECOND, 980), "30 ms in 4 s: under 1 %");
        assertEquals("rdmaperf: settle_s=12.0 (the JIT went quiet; the last warm-up window compiled 30 ms)",
                settle.line());
    }

    @Test
    void oneClockTickIsNoCompilingInAShortWindow() {
        JitSettle settle = new JitSettle(60);
        assertTrue(settle.settled(0, 100, SECOND / 2, 110), "one tick in half a second");
        assertTrue(new JitSettle(60).settled(0, 100, SECOND / 2, 90), "a compiler thread that exited");
    }

    @Test
    void pastTheLimitTheWindowOpensHoweverBusyTheJit() {
        JitSettle settle = new JitSettle(10);
        long t0 = 1_000 * SECOND;
        assertFalse(settle.settled(t0, 0, t0 + 6 * SECOND, 2000));
        assertTrue(settle.settled(t0 + 6 * SECOND, 2000, t0 + 12 * SECOND, 3500), "12 s into a limit of 10");
        assertEquals("rdmaperf: settle_s=12.0 (the JIT was still compiling at the limit; the last warm-up window "
                + "compiled 1500 ms)", settle.line());
    }

    @Test
    void aJvmThatDoesNotTellIsNotWaitedFor() {
        assertTrue(new JitSettle(60).settled(0, -1, SECOND, -1));
    }

    @Test
    void theJitLineSaysWhatWasCompiledInTheWindow() {
        assertEquals("rdmaperf: jit_ms=120 (JIT compiler threads' CPU during the measured window)",
                JitTime.line(1000, 1120));
        assertTrue(JitTime.compilerThreadsMillis() >= 0, "this JVM's compiler threads are not in /proc/self/task");
        assertEquals("rdmaperf: jit_ms=unknown", JitTime.line(-1, 5));
    }
}
