package dev.artemisrdma.transport;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Things counted per source and in all (unfinished handshakes, connections, ids waiting for destroy), for the
 * per-source limits: each count is taken under a rule checked atomically with it and given back once, by whichever
 * thread ends the thing first. Thread safe.
 */
final class SourceCounts {

    /** Whether one more may be counted, given what its source and all sources hold now. */
    @FunctionalInterface
    interface Rule {
        boolean admits(int heldBySource, int total);
    }

    private final Map<SourceKey, Integer> bySource = new HashMap<>();
    private int total;

    /** Counts one for {@code source} if {@code rule} admits it; its release (idempotent), or null. */
    synchronized Runnable tryAdd(SourceKey source, Rule rule) {
        if (!rule.admits(bySource.getOrDefault(source, 0), total)) {
            return null;
        }
        total++;
        bySource.merge(source, 1, Integer::sum);
        AtomicBoolean held = new AtomicBoolean(true);
        return () -> {
            if (held.compareAndSet(true, false)) {
                release(source);
            }
        };
    }

    synchronized int held(SourceKey source) {
        return bySource.getOrDefault(source, 0);
    }

    synchronized int total() {
        return total;
    }

    /** Sources holding at least one. */
    synchronized int sources() {
        return bySource.size();
    }

    private synchronized void release(SourceKey source) {
        total--;
        bySource.computeIfPresent(source, (k, n) -> n == 1 ? null : n - 1);
    }
}
