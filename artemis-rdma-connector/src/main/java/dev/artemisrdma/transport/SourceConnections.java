package dev.artemisrdma.transport;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The connections each source holds on a transport's acceptors, from the request admitted to the channel gone,
 * capped at {@code maxConnectionsPerSource}: one host cannot hold the registered memory (1 MiB per connection that
 * keeps its own receive queue) or the completion loops' places meant for everyone. A request beyond the cap is
 * refused before anything is allocated for it, naming the key. Thread safe: the connection-manager thread admits, a
 * channel's close (any thread) gives its place back.
 */
final class SourceConnections {

    private final int maxPerSource;
    private final Map<SourceKey, Integer> bySource = new HashMap<>();

    SourceConnections(int maxPerSource) {
        this.maxPerSource = maxPerSource;
    }

    /** A place for one more connection from {@code source}, or null when it holds the cap. */
    synchronized Place tryAdmit(SourceKey source) {
        if (bySource.getOrDefault(source, 0) >= maxPerSource) {
            return null;
        }
        bySource.merge(source, 1, Integer::sum);
        return new Place(source);
    }

    /** Why {@code source} was refused. */
    String refusal(SourceKey source) {
        return "too many connections from " + source + " (" + maxPerSource + ", maxConnectionsPerSource): close some "
                + "first";
    }

    /** Connections {@code source} holds now. */
    synchronized int held(SourceKey source) {
        return bySource.getOrDefault(source, 0);
    }

    private synchronized void free(SourceKey source) {
        bySource.computeIfPresent(source, (k, n) -> n == 1 ? null : n - 1);
    }

    /** One connection's place: given back once, when its channel is gone or its accept failed. */
    final class Place implements Runnable {

        private final SourceKey source;
        private final AtomicBoolean held = new AtomicBoolean(true);

        private Place(SourceKey source) {
            this.source = source;
        }

        SourceKey source() {
            return source;
        }

        @Override
        public void run() {
            if (held.compareAndSet(true, false)) {
                free(source);
            }
        }
    }
}
