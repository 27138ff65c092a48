package dev.artemisrdma.transport;

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
    private final SourceCounts waiting = new SourceCounts();

    DestroyBacklog() {
        this(MAX_PER_SOURCE, MAX_TOTAL);
    }

    /** With other bounds, for tests. */
    DestroyBacklog(int maxPerSource, int maxTotal) {
        this.maxPerSource = maxPerSource;
        this.maxTotal = maxTotal;
    }

    /** Why a request from {@code source} is refused now, naming the source and the bound; null: admitted. */
    String refusal(SourceKey source) {
        // short: the reason travels in the reject's private data (136 bytes), the source and the bound first
        int held = waiting.held(source);
        if (held >= maxPerSource) {
            return "too many rdma_cm ids of closed connections from " + source + " await destroy (" + maxPerSource
                    + ", DestroyBacklog.MAX_PER_SOURCE): answer their DREQs";
        }
        int share = Math.max(1, maxTotal / Math.max(1, waiting.sources()));
        if (waiting.total() >= maxTotal && held >= share) {
            return "too many rdma_cm ids await destroy (" + maxTotal + ", DestroyBacklog.MAX_TOTAL); " + source
                    + " holds " + held + ", its fair share " + share;
        }
        return null;
    }

    /** A closed connection from {@code source} waits for its id's destroy; run the result once it is destroyed. */
    Runnable waiting(SourceKey source) {
        return waiting.tryAdd(source, (held, total) -> true);
    }

    /** Ids waiting from {@code source} (for tests and monitoring). */
    int held(SourceKey source) {
        return waiting.held(source);
    }

    /** Ids waiting from all sources. */
    int total() {
        return waiting.total();
    }
}
