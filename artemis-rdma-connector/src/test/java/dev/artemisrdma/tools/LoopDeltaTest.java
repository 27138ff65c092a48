package dev.artemisrdma.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.artemisrdma.transport.stats.LoopStats;
import org.junit.jupiter.api.Test;

/** The loop statistics RdmaPerf prints per run (client) and per connection (server): what happened in between. */
class LoopDeltaTest {

    @Test
    void theLineGivesWhatTheLoopsDidBetweenTwoSnapshots() {
        LoopStats before = new LoopStats(1, 10, 8, 2_000_000, 5, 4, 30_000_000, 50_000_000, 1);
        LoopStats after = new LoopStats(1, 110, 98, 12_500_000, 7, 5, 430_000_000, 150_000_000, 3);
        assertEquals("spins=100 spinHits=90 spin_ms=10.5 blocks=2 wakeUps=1 blocked_ms=400.0 cpu_ms=100.0 "
                + "budgetExhausted=2", LoopDelta.of(before, after));
        assertEquals("spins=0 spinHits=0 spin_ms=0.0 blocks=0 wakeUps=0 blocked_ms=0.0 cpu_ms=0.0 budgetExhausted=0",
                LoopDelta.of(LoopStats.NONE, LoopStats.NONE));
    }
}
