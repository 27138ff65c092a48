package dev.artemisrdma.tools;

import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;

/**
 * Time the JVM's JIT compilers spent compiling, so that the perf tools can say how much of it fell into their
 * measured window. A C tool such as ib_send_lat has nothing to compile; a fresh client JVM under the lab's emulation
 * compiles for seconds, on the same two CPUs the busy-polling ends need, and a window that still compiles measures
 * the JIT as much as the transport.
 */
final class JitTime {

    private static final CompilationMXBean COMPILER = ManagementFactory.getCompilationMXBean();

    private JitTime() {
    }

    /** Milliseconds compiled so far, all compiler threads together; -1 where the JVM does not tell. */
    static long millis() {
        return COMPILER != null && COMPILER.isCompilationTimeMonitoringSupported()
                ? COMPILER.getTotalCompilationTime() : -1;
    }

    /** The line the client prints next to its RESULT line. */
    static String line(long startMillis, long endMillis) {
        if (startMillis < 0 || endMillis < 0) {
            return "rdmaperf: jit_ms=unknown";
        }
        return "rdmaperf: jit_ms=" + (endMillis - startMillis) + " (JIT compiling during the measured window)";
    }
}
