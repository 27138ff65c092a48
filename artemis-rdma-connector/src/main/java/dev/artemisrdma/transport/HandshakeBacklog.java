package dev.artemisrdma.transport;

/**
 * The connections a transport accepted whose handshake has not finished yet, capped in total
 * ({@code maxPendingConnections}) and per source ({@code maxPendingConnectionsPerSource}, a {@link SourceKey}: an IPv6
 * host's prefix, not each of its addresses) (issue 23 item 4).
 * Each holds a queue pair, its receive memory and a loop slot until it is established, or, when its handshake fails
 * or its {@code handshakeTimeout} passes, until its queue pair and rdma_cm id are destroyed (which rxe may take
 * seconds over, and a peer that drops CM messages a minute): the place is held as long as the kernel holds the queue
 * pair. Without a cap, one host opening connections it never finishes would hold them by
 * the thousand and take from everyone else. With the caps, such a host holds at most its share, for at most the
 * handshake timeout, and a request beyond them is refused at once, with the key in the reason, before it costs
 * anything: other sources are still admitted, even once the total is reached (a source holding none is admitted
 * beyond it, one place per source), up to a hard ceiling of twice the total, so that the backlog stays bounded however
 * many sources a host can be (every /64 of a routed IPv6 prefix is one). Thread safe (the connection-manager thread
 * admits; the handshake's end, on any thread, gives the place back).
 */
final class HandshakeBacklog {

    private final int max;
    /** The most places held at once, whatever the number of sources: {@code max} plus one each for as many more. */
    private final long ceiling;
    private final int maxPerSource;
    private final SourceCounts pending = new SourceCounts();

    HandshakeBacklog(int max, int maxPerSource) {
        this.max = max;
        this.ceiling = 2L * max;
        this.maxPerSource = maxPerSource;
    }

    /** A place for a handshake from {@code source} (run it to give it back), or null ({@link #refusal} says why). */
    Runnable tryAdmit(SourceKey source) {
        // a full backlog still admits a source that holds none of it: a host with many addresses (IPv4 aliases, each
        // its own source under ipv4SourcePrefix 32) cannot shut out the others, and the total exceeds the cap by at
        // most one per source, each of which holds one place only until its handshake ends; the ceiling bounds even
        // that, for a host with more sources than the cap (past it, requests wait for handshakes to end, as before)
        return pending.tryAdd(source,
                (held, total) -> held < maxPerSource && (total < max || (held == 0 && total < ceiling)));
    }

    /** Why {@code source} was refused a place: the cap it reached, with its key. */
    String refusal(SourceKey source) {
        if (pending.held(source) >= maxPerSource) {
            return "too many unfinished connections from " + source + " ("
                    + maxPerSource + ", maxPendingConnectionsPerSource): finish or close them first";
        }
        int total = pending.total();
        if (total >= ceiling) {
            return "too many unfinished connections (" + total + " from " + pending.sources()
                    + " sources, twice maxPendingConnections " + max + "): retry once some are done";
        }
        return "too many unfinished connections (" + max + ", maxPendingConnections) and " + pending.held(source)
                + " from " + source + ": retry once it is done";
    }
}
