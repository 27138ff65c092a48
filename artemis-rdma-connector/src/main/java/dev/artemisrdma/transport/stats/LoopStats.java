package dev.artemisrdma.transport.stats;

/**
 * What the completion loops of a transport did, summed over its loops (those that stopped or failed keep their
 * share): how often they busy-polled and whether it paid, how often they blocked and were woken, and the CPU their
 * threads used. For monitoring and benchmarks; every counter only grows while the transport is open.
 *
 * @param loops        completion loops made so far (threads)
 * @param spins        idle periods in which a loop busy-polled before blocking
 * @param spinHits     of those, how many found a completion while spinning (a wake-up saved)
 * @param spinNanos    time spent busy-polling while idle
 * @param blocks       times a loop armed its completion channel and blocked
 * @param wakeUps      of those, how many a completion ended (the others: a timeout, or a wake() for a deadline)
 * @param blockedNanos time spent blocked
 * @param cpuNanos     CPU time of the loop threads (user and system; -1 when the JVM cannot measure thread CPU)
 * @param budgetExhaustedPeriods periods of 100 ms in which the loops used up their spin budget (one core's
 *                     worth of spinning, all loops of the transport together)
 */
public record LoopStats(int loops, long spins, long spinHits, long spinNanos, long blocks, long wakeUps,
                        long blockedNanos, long cpuNanos, long budgetExhaustedPeriods) {

    /** No loop yet. */
    public static final LoopStats NONE = new LoopStats(0, 0, 0, 0, 0, 0, 0, 0, 0);

    /** The sum of two loops' counters (a transport's total). */
    public LoopStats plus(LoopStats o) {
        return new LoopStats(loops + o.loops, spins + o.spins, spinHits + o.spinHits, spinNanos + o.spinNanos,
                blocks + o.blocks, wakeUps + o.wakeUps, blockedNanos + o.blockedNanos,
                cpuNanos < 0 || o.cpuNanos < 0 ? -1 : cpuNanos + o.cpuNanos,
                budgetExhaustedPeriods + o.budgetExhaustedPeriods);
    }

    /** Share of the spins that found a completion (0 when none). */
    public double spinHitRatio() {
        return spins == 0 ? 0 : (double) spinHits / spins;
    }
}
