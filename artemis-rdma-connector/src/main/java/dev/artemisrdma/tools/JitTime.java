package dev.artemisrdma.tools;

import java.io.IOException;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

/**
 * CPU the JVM's JIT compiler threads have used, so that the perf tools can say how much compiling fell into their
 * measured window. A C tool such as ib_send_lat has nothing to compile; a fresh client JVM under the lab's emulation
 * compiles for many seconds, on the same two CPUs the busy-polling ends need, and a window that still compiles
 * measures the JIT as much as the transport.
 *
 * <p>Read from the compiler threads' {@code /proc/self/task/TID/stat} (names "C1 CompilerThre...", "C2 ..."), so a
 * compilation in progress counts as it runs: the JVM's own compilation time counts one only when it ends, and under
 * emulation a single C2 compilation ran for seconds. Where /proc cannot tell, the JVM's total compilation time.
 */
final class JitTime {

    private static final Path TASKS = Path.of("/proc/self/task");
    private static final Pattern COMPILER_THREAD = Pattern.compile("C\\d CompilerThre.*");
    private static final CompilationMXBean COMPILER = ManagementFactory.getCompilationMXBean();

    private JitTime() {
    }

    /** Milliseconds of JIT compiling so far, all compiler threads together; -1 where neither source tells. */
    static long millis() {
        long fromProc = compilerThreadsMillis();
        if (fromProc >= 0) {
            return fromProc;
        }
        return COMPILER != null && COMPILER.isCompilationTimeMonitoringSupported()
                ? COMPILER.getTotalCompilationTime() : -1;
    }

    /**
     * CPU of the compiler threads alive now, from /proc; -1 without it. A compiler thread that exits (HotSpot stops
     * idle ones) takes its time with it, so the figure can fall: callers take differences over short spans.
     */
    static long compilerThreadsMillis() {
        if (!Files.isDirectory(TASKS)) {
            return -1;
        }
        long ticks = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(TASKS)) {
            for (Path task : tasks) {
                String stat;
                try {
                    stat = Files.readString(task.resolve("stat"));
                } catch (IOException e) {
                    continue; // the thread ended meanwhile
                }
                int open = stat.indexOf('(');
                int close = stat.lastIndexOf(')');
                if (open < 0 || close < open || !COMPILER_THREAD.matcher(stat.substring(open + 1, close)).matches()) {
                    continue;
                }
                ticks += ProcessCpu.cpuTicks(stat);
            }
        } catch (IOException | RuntimeException e) {
            return -1;
        }
        return TimeUnit.NANOSECONDS.toMillis(ticks * ProcessCpu.NANOS_PER_TICK);
    }

    /** The line the client prints next to its RESULT line. */
    static String line(long startMillis, long endMillis) {
        if (startMillis < 0 || endMillis < 0) {
            return "rdmaperf: jit_ms=unknown";
        }
        return "rdmaperf: jit_ms=" + Math.max(0, endMillis - startMillis)
                + " (JIT compiler threads' CPU during the measured window)";
    }
}
