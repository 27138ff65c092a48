package dev.artemisrdma.tools;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/**
 * CPU time this process has used (all threads, user and system), from {@code /proc/self/stat}, so that the perf
 * tools can report CPU per message over their measured window, as a benchmark script reads it for perftest's
 * processes. Clock ticks of 10 ms (USER_HZ is 100 on Linux): windows of a second or more are precise enough.
 */
final class ProcessCpu {

    private static final Path STAT = Path.of("/proc/self/stat");
    /** One clock tick of /proc's CPU times: USER_HZ is 100 on Linux. */
    static final long NANOS_PER_TICK = 10_000_000L;

    private ProcessCpu() {
    }

    /** User plus system CPU time of this process in nanoseconds; -1 where /proc cannot tell (not Linux). */
    static long nanos() {
        try {
            return cpuTicks(Files.readString(STAT)) * NANOS_PER_TICK;
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    /**
     * User plus system clock ticks from the text of a {@code stat} file of /proc (a process's or a thread's).
     *
     * @throws RuntimeException when the text is not such a file's
     */
    static long cpuTicks(String stat) {
        // the command name (2nd field) may hold spaces and parentheses: count fields after its closing ')'
        String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return Long.parseLong(fields[11]) + Long.parseLong(fields[12]); // utime, stime
    }

    /** The line the client prints next to its RESULT line: CPU of this process per measured message. */
    static String line(long startNanos, long endNanos, long messages) {
        if (startNanos < 0 || endNanos < 0 || messages <= 0) {
            return "rdmaperf: cpu_us_per_msg=unknown (no /proc/self/stat)";
        }
        double cpuMillis = (endNanos - startNanos) / 1e6;
        return String.format(Locale.ROOT, "rdmaperf: cpu_us_per_msg=%.3f cpu_ms=%.0f messages=%d",
                cpuMillis * 1000 / messages, cpuMillis, messages);
    }
}
