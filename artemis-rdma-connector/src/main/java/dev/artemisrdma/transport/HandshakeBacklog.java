package dev.artemisrdma.transport;

import java.time.Duration;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

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
 * many sources a host can be (every /64 of a routed IPv6 prefix is one).
 * <p>A handshake that expires (the peer never finished it within {@code handshakeTimeout}) keeps its place against
 * its source, though not against the total, for one more {@code handshakeTimeout} after its queue pair is gone: a
 * source that opens requests and leaves them unfinished gets its places back at half the rate, so a flood that outlasts
 * the timeout cannot have its source's places given again while the first round is still being torn down (the lab
 * saw a /64's 64 places given twice under load, each admission with the old handshake a queue pair and about 1 MiB
 * registered). An honest peer whose handshake was lost loses one place of {@code maxPendingConnectionsPerSource} for
 * that long. Thread safe (the connection-manager thread admits; the handshake's end, on any thread, gives the place
 * back; the transport's timer ends a cool-down).
 */
final class HandshakeBacklog {

    private final int max;
    /** The most places held at once, whatever the number of sources: {@code max} plus one each for as many more. */
    private final long ceiling;
    private final int maxPerSource;
    private final SourceCounts pending = new SourceCounts();
    /** Expired handshakes' places still held against their source, each for {@code coolDown} after its release. */
    private final SourceCounts coolingDown = new SourceCounts();
    private final Duration coolDown;
    private final ScheduledExecutorService timer;

    HandshakeBacklog(int max, int maxPerSource, Duration coolDown, ScheduledExecutorService timer) {
        this.max = max;
        this.ceiling = 2L * max;
        this.maxPerSource = maxPerSource;
        this.coolDown = coolDown;
        this.timer = timer;
    }

    /** A place for a handshake from {@code source}, or null ({@link #refusal} says why). */
    Place tryAdmit(SourceKey source) {
        // a full backlog still admits a source that holds none of it: a host with many addresses (IPv4 aliases, each
        // its own source under ipv4SourcePrefix 32) cannot shut out the others, and the total exceeds the cap by at
        // most one per source, each of which holds one place only until its handshake ends; the ceiling bounds even
        // that, for a host with more sources than the cap (past it, requests wait for handshakes to end, as before).
        // Places cooling down count against their source only: they hold no queue pair or memory any more
        Runnable release = pending.tryAdd(source, (unfinished, total) -> {
            int held = unfinished + coolingDown.held(source);
            return held < maxPerSource && (total < max || (held == 0 && total < ceiling));
        });
        return release == null ? null : new Place(source, release);
    }

    /** Why {@code source} was refused a place: the cap it reached, with its key. */
    String refusal(SourceKey source) {
        int cooling = coolingDown.held(source);
        if (pending.held(source) + cooling >= maxPerSource) {
            // (a reject's reason has 136 bytes: the cool-down's is said in few words)
            return "too many unfinished connections from " + source + " (" + maxPerSource
                    + ", maxPendingConnectionsPerSource)" + (cooling == 0 ? ": finish or close them first"
                            : ", " + cooling + " of them expired: retry in "
                                    + Math.max(1, (coolDown.toMillis() + 999) / 1000) + " s");
        }
        int total = pending.total();
        if (total >= ceiling) {
            return "too many unfinished connections (" + total + " from " + pending.sources()
                    + " sources, twice maxPendingConnections " + max + "): retry once some are done";
        }
        return "too many unfinished connections (" + max + ", maxPendingConnections) and " + pending.held(source)
                + " from " + source + ": retry once it is done";
    }

    /**
     * One handshake's place: given back once, by whichever ends the handshake first; when the handshake expired
     * ({@link #expired}) and its channel was torn down, only after the cool-down.
     */
    final class Place implements Runnable {

        private final SourceKey source;
        private final Runnable release;
        private final AtomicBoolean given = new AtomicBoolean();
        private volatile boolean expired;

        private Place(SourceKey source, Runnable release) {
            this.source = source;
            this.release = release;
        }

        /** The peer let the handshake's deadline pass: this place cools down once given back by {@link #run}. */
        void expired() {
            expired = true;
        }

        /** The handshake succeeded (or the channel opened at its deadline after all): given back now. */
        void established() {
            if (given.compareAndSet(false, true)) {
                release.run();
            }
        }

        /** The handshake ended and its queue pair is gone: given back, after the cool-down if it expired. */
        @Override
        public void run() {
            if (!given.compareAndSet(false, true)) {
                return;
            }
            if (!expired) {
                release.run();
                return;
            }
            // counted as cooling before it leaves the unfinished ones: never a moment in which the source holds less
            Runnable cooled = coolingDown.tryAdd(source, (held, total) -> true);
            release.run();
            try {
                timer.schedule(cooled, coolDown.toNanos(), TimeUnit.NANOSECONDS);
            } catch (RuntimeException e) {
                cooled.run(); // the transport is closing (its timer refuses work): nothing to hold a place against
            }
        }
    }
}
