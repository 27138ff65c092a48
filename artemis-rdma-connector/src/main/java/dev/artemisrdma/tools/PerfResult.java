package dev.artemisrdma.tools;

import org.HdrHistogram.Histogram;

import java.util.Locale;

/** The figures of one run, printed as the single RESULT line scripts parse. */
record PerfResult(String layer, String mode, int size, int iters, double p50Micros, double p99Micros,
                  double minMicros, double messagesPerSecond) {

    static PerfResult of(String layer, String mode, int size, int iters, Histogram nanos, long elapsedNanos,
                         long messages) {
        double seconds = elapsedNanos / 1e9;
        return new PerfResult(layer, mode, size, iters, nanos.getValueAtPercentile(50) / 1000.0,
                nanos.getValueAtPercentile(99) / 1000.0, nanos.getMinValue() / 1000.0, messages / seconds);
    }

    double gigabitsPerSecond() {
        return messagesPerSecond * size * 8 / 1e9;
    }

    /** RESULT layer=transport mode=lat size=1024 iters=20000 p50_us=12.3 p99_us=30.1 msgs_per_s=81234 gbit_per_s=0.66 */
    String line() {
        return String.format(Locale.ROOT, "RESULT layer=%s mode=%s size=%d iters=%d p50_us=%.1f p99_us=%.1f "
                + "msgs_per_s=%d gbit_per_s=%.2f", layer, mode, size, iters, p50Micros, p99Micros,
                Math.round(messagesPerSecond), gigabitsPerSecond());
    }
}
