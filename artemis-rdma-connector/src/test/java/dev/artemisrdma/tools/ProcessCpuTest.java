package dev.artemisrdma.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The CPU figure RdmaPerf prints beside its RESULT line, which rdmaperf-bench turns into CPU per message. */
class ProcessCpuTest {

    @Test
    void processCpuTimeGrowsWhileThisProcessComputes() {
        long start = ProcessCpu.nanos();
        assertTrue(start > 0, "/proc/self/stat gave no CPU time: " + start);
        long deadline = System.nanoTime() + 10_000_000_000L;
        long now = start;
        long sink = 0;
        while (now - start < 50_000_000L && System.nanoTime() < deadline) { // five clock ticks of work
            for (int i = 0; i < 1_000_000; i++) {
                sink += i ^ sink;
            }
            now = ProcessCpu.nanos();
            assertTrue(now >= start, "CPU time went backwards: " + start + " then " + now);
        }
        assertTrue(now - start >= 50_000_000L, "10 s of computing used " + (now - start) + " ns of CPU (" + sink + ")");
    }

    @Test
    void theLineGivesMicrosecondsPerMessageAndSaysSoWhenUnknown() {
        assertEquals("rdmaperf: cpu_us_per_msg=25.000 cpu_ms=500 messages=20000",
                ProcessCpu.line(1_000_000_000L, 1_500_000_000L, 20_000));
        assertEquals("rdmaperf: cpu_us_per_msg=unknown (no /proc/self/stat)", ProcessCpu.line(-1, 5, 20_000));
    }
}
