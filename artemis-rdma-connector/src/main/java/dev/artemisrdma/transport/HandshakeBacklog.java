package dev.artemisrdma.transport;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The connections a transport accepted whose handshake has not finished yet, capped in total
 * ({@code maxPendingConnections}) and per source ({@code maxPendingConnectionsPerSource}, a {@link SourceKey}: an IPv6
 * host's prefix, not each of its addresses) (issue 23 item 4).
 * Each holds a queue pair, its receive memory and a loop slot until it is established or its
 * {@code handshakeTimeout} passes; without a cap, one host opening connections it never finishes would hold them by
 * the thousand and take from everyone else. With the caps, such a host holds at most its share, for at most the
 * handshake timeout, and a request beyond them is refused at once, with the key in the reason, before it costs
 * anything: other sources are still admitted. Thread safe (the connection-manager thread admits; the handshake's
 * end, on any thread, gives the place back).
 */
final class HandshakeBacklog {

    private final int max;
    private final int maxPerSource;
    private int total;
    private final Map<SourceKey, Integer> bySource = new HashMap<>();

    HandshakeBacklog(int max, int maxPerSource) {
        this.max = max;
        this.maxPerSource = maxPerSource;
    }

    /** A place for a handshake from {@code source}, or null (with {@link #refusal} saying why). */
    synchronized Place tryAdmit(SourceKey source) {
        if (total >= max || bySource.getOrDefault(source, 0) >= maxPerSource) {
            return null;
        }
        total++;
        bySource.merge(source, 1, Integer::sum);
        return new Place(source);
    }

    /** Why {@code source} was refused a place: the cap it reached, with its key. */
    synchronized String refusal(SourceKey source) {
        if (bySource.getOrDefault(source, 0) >= maxPerSource) {
            return "too many unfinished connections from " + source + " ("
                    + maxPerSource + ", maxPendingConnectionsPerSource): finish or close them first";
        }
        return "too many unfinished connections (" + max + ", maxPendingConnections): retry later";
    }

    private synchronized void free(SourceKey source) {
        total--;
        bySource.computeIfPresent(source, (k, n) -> n == 1 ? null : n - 1);
    }

    /** One handshake's place: given back once, by whichever ends the handshake first. */
    final class Place implements Runnable {

        private final SourceKey source;
        private final AtomicBoolean held = new AtomicBoolean(true);

        private Place(SourceKey source) {
            this.source = source;
        }

        /** Gives the place back (idempotent). */
        @Override
        public void run() {
            if (held.compareAndSet(true, false)) {
                free(source);
            }
        }
    }
}
