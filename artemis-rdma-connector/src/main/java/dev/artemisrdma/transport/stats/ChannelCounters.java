package dev.artemisrdma.transport.stats;

import dev.artemisrdma.transport.fabric.WcStatus;

/**
 * What the completion loop sees of one channel beyond the frame counters of {@link TransportStats}: every work
 * completion, the failed ones by kind, and protocol errors. Written by the channel's completion loop thread only
 * (its channel's {@code counters()}, which monitoring only reads), published without a fence per count
 * ({@link PublishedCounters}) so that monitoring threads read current values.
 */
public final class ChannelCounters {

    private static final int COMPLETIONS = 0;
    private static final int RNR_RETRY_ERRORS = 1;
    private static final int RETRY_ERRORS = 2;
    private static final int OTHER_ERRORS = 3;
    private static final int PROTOCOL_ERRORS = 4;

    private final PublishedCounters counts = new PublishedCounters(5);

    /**
     * Counts one completion. Flushes are not errors: every work request outstanding at a disconnect completes
     * flushed, so they count as completions only.
     */
    public void completed(int status) {
        counts.increment(COMPLETIONS);
        switch (status) {
            case WcStatus.SUCCESS:
            case WcStatus.WR_FLUSH_ERR:
                break;
            case WcStatus.RNR_RETRY_EXC_ERR:
                counts.increment(RNR_RETRY_ERRORS);
                break;
            case WcStatus.RETRY_EXC_ERR:
                counts.increment(RETRY_ERRORS);
                break;
            default:
                counts.increment(OTHER_ERRORS);
        }
    }

    public void protocolError() {
        counts.increment(PROTOCOL_ERRORS);
    }

    /** Work completions polled for this channel, successful or not. */
    public long completions() {
        return counts.get(COMPLETIONS);
    }

    /** Sends that failed with IBV_WC_RNR_RETRY_EXC_ERR: the peer had no receive posted (a credit bug). */
    public long rnrRetryErrors() {
        return counts.get(RNR_RETRY_ERRORS);
    }

    /** Work requests that failed with IBV_WC_RETRY_EXC_ERR: the peer or the network stopped answering. */
    public long retryErrors() {
        return counts.get(RETRY_ERRORS);
    }

    /** Failed completions of any other status except flushes (IBV_WC_WR_FLUSH_ERR). */
    public long otherErrors() {
        return counts.get(OTHER_ERRORS);
    }

    /** Frames from the peer that broke the wire protocol (the channel is closed on the first). */
    public long protocolErrors() {
        return counts.get(PROTOCOL_ERRORS);
    }
}
