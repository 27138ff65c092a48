package dev.artemisrdma.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * RdmaPerf's warm-up that waits for the JIT ({@code --settle}), its options and the jit_ms line. The quiet case
 * depends on this JVM's compiler threads, so the tests take the paths that do not: off, the first second, the limit.
 */
class JitSettleTest {

    private static final long SECOND = 1_000_000_000L;

    @Test
    void withoutALimitTheWarmUpEndsAtItsCount() {
        JitSettle off = new JitSettle(0);
        assertTrue(off.settled(0));
        assertEquals("rdmaperf: settle=off", off.line());
    }

    @Test
    void noVerdictBeforeThreeSecondsOfLooking() {
        JitSettle settle = new JitSettle(3);
        long t0 = 1_000 * SECOND;
        assertTrue(JitTime.millis() >= 0, "this JVM does not report compilation time");
        assertFalse(settle.settled(t0), "the first look opens a window");
        assertFalse(settle.settled(t0 + SECOND / 2), "half a second says nothing yet");
        assertFalse(settle.settled(t0 + SECOND - 1), "nor does a hair under a second");
        assertFalse(settle.settled(t0 + SECOND), "one quiet second is not enough: C2 compiles in bursts");
        assertFalse(settle.settled(t0 + 2 * SECOND), "nor are two");
    }

    @Test
    void pastTheLimitTheWindowOpensHoweverBusyTheJit() {
        JitSettle settle = new JitSettle(1);
        long t0 = 1_000 * SECOND;
        assertFalse(settle.settled(t0));
        assertTrue(settle.settled(t0 + 2 * SECOND), "two seconds into a limit of one");
        assertEquals("rdmaperf: settle_s=2.0 (the JIT was still compiling at the limit)", settle.line());
    }

    @Test
    void theJitLineSaysWhatWasCompiledInTheWindow() {
        assertEquals("rdmaperf: jit_ms=120 (JIT compiler threads' CPU during the measured window)",
                JitTime.line(1000, 1120));
        assertTrue(JitTime.compilerThreadsMillis() >= 0, "this JVM's compiler threads are not in /proc/self/task");
        assertEquals("rdmaperf: jit_ms=unknown", JitTime.line(-1, 5));
    }

    @Test
    void settleIsTheTransportPingPongsAndBounded() {
        String[] base = {"client", "--connect", "10.0.0.1", "--port", "19000"};
        assertEquals(0, PerfOptions.parse(base).settle());
        assertEquals(60, PerfOptions.parse(with(base, "--layer", "transport", "--mode", "lat", "--settle", "60"))
                .settle());
        IllegalArgumentException verbs = assertThrows(IllegalArgumentException.class,
                () -> PerfOptions.parse(with(base, "--layer", "verbs", "--settle", "60")));
        assertTrue(verbs.getMessage().contains("--layer transport --mode lat only"), verbs.getMessage());
        assertThrows(IllegalArgumentException.class,
                () -> PerfOptions.parse(with(base, "--layer", "transport", "--mode", "bw", "--settle", "60")));
        IllegalArgumentException tooLong = assertThrows(IllegalArgumentException.class,
                () -> PerfOptions.parse(with(base, "--layer", "transport", "--settle", "601")));
        assertTrue(tooLong.getMessage().contains("0..600"), tooLong.getMessage());
        assertThrows(IllegalArgumentException.class,
                () -> PerfOptions.parse(with(base, "--layer", "transport", "--warmup", "-1")));
    }

    private static String[] with(String[] base, String... more) {
        String[] all = java.util.Arrays.copyOf(base, base.length + more.length);
        System.arraycopy(more, 0, all, base.length, more.length);
        return all;
    }
}
