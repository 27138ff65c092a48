package dev.artemisrdma.tools;

import dev.artemisrdma.transport.stats.LoopStats;

import java.util.Locale;

/** What a transport's completion loops did between two snapshots, as one line for RdmaPerf's output. */
final class LoopDelta {

    private LoopDelta() {
    }

    static String of(LoopStats before, LoopStats after) {
        return String.format(Locale.ROOT, "spins=%d spinHits=%d spin_ms=%.1f blocks=%d wakeUps=%d blocked_ms=%.1f "
                        + "cpu_ms=%.1f budgetExhausted=%d",
                after.spins() - before.spins(), after.spinHits() - before.spinHits(),
                (after.spinNanos() - before.spinNanos()) / 1e6, after.blocks() - before.blocks(),
                after.wakeUps() - before.wakeUps(), (after.blockedNanos() - before.blockedNanos()) / 1e6,
                (after.cpuNanos() - before.cpuNanos()) / 1e6,
                after.budgetExhaustedPeriods() - before.budgetExhaustedPeriods());
    }
}
