package dev.artemisrdma.transport;

/**
 * The connections each source holds on a transport's acceptors, from the request admitted to the channel gone,
 * capped at {@code maxConnectionsPerSource}: one host cannot hold the registered memory (1 MiB per connection that
 * keeps its own receive queue) or the completion loops' places meant for everyone. A request beyond the cap is
 * refused before anything is allocated for it, naming the key. Thread safe: the connection-manager thread admits, a
 * channel's close (any thread) gives its place back.
 */
final class SourceConnections {

    private final int maxPerSource;
    private final SourceCounts held = new SourceCounts();

    SourceConnections(int maxPerSource) {
        this.maxPerSource = maxPerSource;
    }

    /** A place for one more connection from {@code source} (run it to give it back), or null at the cap. */
    Runnable tryAdmit(SourceKey source) {
        return held.tryAdd(source, (bySource, total) -> bySource < maxPerSource);
    }

    /** Why {@code source} was refused. */
    String refusal(SourceKey source) {
        return "too many connections from " + source + " (" + maxPerSource + ", maxConnectionsPerSource): close some "
                + "first";
    }

    /** Connections {@code source} holds now. */
    int held(SourceKey source) {
        return held.held(source);
    }
}
