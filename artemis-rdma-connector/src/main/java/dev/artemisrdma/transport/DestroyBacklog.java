package dev.artemisrdma.transport;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Accepted connections that are closed but whose rdma_cm id the fabric has not destroyed yet, per source (issue 37
 * hole 4). rdma_destroy_id waits for the id's CM messages: a peer that provokes a disconnect and then drops CM
 * messages holds each destroy about 66 s (16 DREQ tries), so without a bound one host could pile up kernel cm_ids
 * (and whatever waits with them) faster than they drain. What waits is counted against the peer's {@link SourceKey}
 * until the fabric let go of the id, and new connection requests are refused, before anything is allocated, from a
 * source that has {@link #MAX_PER_SOURCE} (64) ids waiting, or, once {@link #MAX_TOTAL} (1,024) wait from all
 * sources together, from a source holding at least its fair share of them (the total split over the sources
 * waiting, at least 1): a source with none waiting is always admitted, so other sources are still served and the
 * total exceeds {@link #MAX_TOTAL} by at most one per source. An honest peer answers the DREQ within milliseconds
 * (a rebooted host's CM answers for ids it no longer knows), so only a peer that ignores CM messages meets these.
 * Thread safe: the connection-manager thread admits; a destroyer thread (or a channel's close) gives back.
 */
final class DestroyBacklog {

    /** Ids one source may have waiting for destroy before its requests are refused. */
    static final int MAX_PER_SOURCE = 64;
    /** Ids all sources together may have waiting before each is held to its fair share. */
    static final int MAX_TOTAL = 1024;

    private final int maxPerSource;
    private final int maxTotal;
    private int total;
    private final Map<SourceKey, Integer> bySource = new HashMap<>();

    DestroyBacklog() {
        this(MAX_PER_SOURCE, MAX_TOTAL);
    }

    /** With other bounds, for tests. */
    DestroyBacklog(int maxPerSource, int maxTotal) {
        this.maxPerSource = maxPerSource;
        this.maxTotal = maxTotal;
    }

    /** Why a request from {@code source} is refused now, naming the source and the bound; null: admitted. */
    synchronized String refusal(SourceKey source) {
        // short: the reason travels in the reject's private data (136 bytes), the source and the bound first
        int held = bySource.getOrDefault(source, 0);
        if (held >= maxPerSource) {
            return "too many rdma_cm ids of closed connections from " + source + " await destroy (" + maxPerSource
                    + ", DestroyBacklog.MAX_PER_SOURCE): answer their DREQs";
        }
        int share = Math.max(1, maxTotal / Math.max(1, bySource.size()));
        if (total >= maxTotal && held >= share) {
            return "too many rdma_cm ids await destroy (" + maxTotal + ", DestroyBacklog.MAX_TOTAL); " + source
                    + " holds " + held + ", its fair share " + share;
        }
        return null;
    }

    /** A closed connection from {@code source} waits for its id's destroy; run the result once it is destroyed. */
    synchronized Runnable waiting(SourceKey source) {
        total++;
        bySource.merge(source, 1, Integer::sum);
        return new Waiting(source);
    }

    /** Ids waiting from {@code source} (for tests and monitoring). */
    synchronized int held(SourceKey source) {
        return bySource.getOrDefault(source, 0);
    }

    /** Ids waiting from all sources. */
    synchronized int total() {
        return total;
    }

    private synchronized void gone(SourceKey source) {
        total--;
        bySource.computeIfPresent(source, (k, n) -> n == 1 ? null : n - 1);
    }

    /** One id's place: given back once, however often the fabric reports it gone. */
    private final class Waiting implements Runnable {

        private final SourceKey source;
        private final AtomicBoolean held = new AtomicBoolean(true);

        private Waiting(SourceKey source) {
            this.source = source;
        }

        @Override
        public void run() {
            if (held.compareAndSet(true, false)) {
                gone(source);
            }
        }
    }
}
