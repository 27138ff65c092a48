package dev.artemisrdma.transport.stats;

import java.util.HashSet;
import java.util.Set;

/**
 * Running totals over a group of channels (one acceptor's, one connection factory's): the live channels' counters
 * plus those of the channels that already closed, so every total only grows. Registered bytes are the live channels'
 * own registrations plus each shared receive pool they use, counted once. Channels are read through
 * {@link ChannelMeasures}, which every channel is.
 *
 * <p>Thread-safe. A snapshot walks the live channels, so it costs O(connections): meant for scrapes, not the data
 * path (which never touches this class).
 */
public final class ChannelGroupStats {

    /** Totals of a group at one moment. */
    public record Snapshot(long bytesSent, long framesSent, long bytesReceived, long framesReceived,
                           long completions, long creditStalls, long rnrRetryErrors, long retryErrors,
                           long otherErrors, long protocolErrors, long registeredBytes, int connections,
                           long framesPacked, long immediateSends, int olderPeers) {
    }

    private final Set<ChannelMeasures> live = new HashSet<>();
    /** Totals of the channels that closed; guarded by this. */
    private final Totals closed = new Totals();

    public synchronized void add(ChannelMeasures channel) {
        live.add(channel);
    }

    /** The channel closed: its final counters join the totals (once, however often this is called). */
    public synchronized void remove(ChannelMeasures channel) {
        if (live.remove(channel)) {
            closed.add(channel);
        }
    }

    public synchronized Snapshot snapshot() {
        Totals t = new Totals();
        t.plus(closed);
        long registered = 0;
        Set<ChannelMeasures.SharedPool> pools = new HashSet<>();
        int olderPeers = 0;
        for (ChannelMeasures channel : live) {
            t.add(channel);
            if (channel.olderPeer()) {
                olderPeers++;
            }
            registered += channel.registeredBytes();
            ChannelMeasures.SharedPool pool = channel.sharedPool();
            if (pool != null && pools.add(pool)) {
                registered += pool.registeredBytes(); // once per pool, however many channels share it
            }
        }
        return new Snapshot(t.bytesSent, t.framesSent, t.bytesReceived, t.framesReceived, t.completions,
                t.creditStalls, t.rnrRetryErrors, t.retryErrors, t.otherErrors, t.protocolErrors, registered,
                live.size(), t.framesPacked, t.immediateSends, olderPeers);
    }

    /** A running sum of channel counters. */
    private static final class Totals {
        long bytesSent;
        long framesSent;
        long bytesReceived;
        long framesReceived;
        long completions;
        long creditStalls;
        long rnrRetryErrors;
        long retryErrors;
        long otherErrors;
        long protocolErrors;
        long framesPacked;
        long immediateSends;

        void add(ChannelMeasures channel) {
            TransportStats s = channel.stats();
            ChannelCounters c = channel.counters();
            bytesSent += s.bytesSent();
            framesSent += s.framesSent();
            bytesReceived += s.bytesReceived();
            framesReceived += s.framesReceived();
            creditStalls += s.creditStalls();
            framesPacked += s.framesPacked();
            immediateSends += s.immediateSends();
            completions += c.completions();
            rnrRetryErrors += c.rnrRetryErrors();
            retryErrors += c.retryErrors();
            otherErrors += c.otherErrors();
            protocolErrors += c.protocolErrors();
        }

        void plus(Totals o) {
            bytesSent += o.bytesSent;
            framesSent += o.framesSent;
            bytesReceived += o.bytesReceived;
            framesReceived += o.framesReceived;
            completions += o.completions;
            creditStalls += o.creditStalls;
            rnrRetryErrors += o.rnrRetryErrors;
            retryErrors += o.retryErrors;
            otherErrors += o.otherErrors;
            protocolErrors += o.protocolErrors;
            framesPacked += o.framesPacked;
            immediateSends += o.immediateSends;
        }
    }
}
