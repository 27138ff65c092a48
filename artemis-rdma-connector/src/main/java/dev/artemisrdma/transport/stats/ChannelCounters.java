package dev.artemisrdma.transport.stats;

import dev.artemisrdma.transport.fabric.WcStatus;

/**
 * What the completion loop sees of one channel beyond the frame counters of {@link TransportStats}: every work
 * completion, the failed ones by kind, and protocol errors. Written by the channel's completion loop thread only
 * (its channel's {@code counters()}, which monitoring only reads); volatile so that monitoring threads read current
 * values.
 */
public final class ChannelCounters {

    private volatile long completions;
    private volatile long rnrRetryErrors;
    private volatile long retryErrors;
    private volatile long otherErrors;
    private volatile long protocolErrors;

    /**
     * Counts one completion. Flushes are not errors: every work request outstanding at a disconnect completes
     * flushed, so they count as completions only.
     */
    public void completed(int status) {
        completions++;
        switch (status) {
            case WcStatus.SUCCESS:
            case WcStatus.WR_FLUSH_ERR:
                break;
            case WcStatus.RNR_RETRY_EXC_ERR:
                rnrRetryErrors++;
                break;
            case WcStatus.RETRY_EXC_ERR:
                retryErrors++;
                break;
            default:
                otherErrors++;
        }
    }

    public void protocolError() {
        protocolErrors++;
    }

    /** Work completions polled for this channel, successful or not. */
    public long completions() {
        return completions;
    }

    /** Sends that failed with IBV_WC_RNR_RETRY_EXC_ERR: the peer had no receive posted (a credit bug). */
    public long rnrRetryErrors() {
        return rnrRetryErrors;
    }

    /** Work requests that failed with IBV_WC_RETRY_EXC_ERR: the peer or the network stopped answering. */
    public long retryErrors() {
        return retryErrors;
    }

    /** Failed completions of any other status except flushes (IBV_WC_WR_FLUSH_ERR). */
    public long otherErrors() {
        return otherErrors;
    }

    /** Frames from the peer that broke the wire protocol (the channel is closed on the first). */
    public long protocolErrors() {
        return protocolErrors;
    }
}
