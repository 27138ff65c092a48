package dev.artemisrdma.transport.channel;

/**
 * The lifecycle of a channel. Every change goes through {@link #moveTo}, which refuses a transition the lifecycle
 * does not have, so a path that would, say, reopen a draining channel fails loudly instead of corrupting it.
 *
 * <pre>
 *  CONNECTING --established--&gt; OPEN --close()--&gt; CLOSING --goodbye done or closeTimeout--&gt; DRAINING
 *      |                          |                                                           |
 *      |                          +------------- failure, disconnect, forceClose ------------&gt;+
 *      +-- failure with a queue pair -----------------------------------------------------------+
 *      |                                                                                         v
 *      +-- connect/accept aborted --&gt; RELEASING --(loop thread)--&gt; CLOSED &lt;--(loop thread)-- DRAINING
 *      +-- aborted before any completion loop slot was taken ----&gt; CLOSED
 * </pre>
 * "established" is rdma_cm's event, or on the passive side the peer's first frame if that comes first.
 * A connect or accept that fails while its channel is already draining cuts the drain short: the queue pair is
 * destroyed at once and DRAINING moves to RELEASING.
 */
enum ChannelState {
    /** Queue pair being set up or handshake not finished; written frames wait. */
    CONNECTING,
    /** Frames flow. */
    OPEN,
    /** Orderly close: pending frames, then the goodbye, then disconnect. */
    CLOSING,
    /** Disconnected: every posted work request is coming back (flushed) before the queue pair is destroyed. */
    DRAINING,
    /** Never established and its queue pair already destroyed: its memory waits for the loop thread to free it. */
    RELEASING,
    /** Everything released. */
    CLOSED;

    boolean canMoveTo(ChannelState next) {
        return switch (this) {
            case CONNECTING -> next == OPEN || next == DRAINING || next == RELEASING || next == CLOSED;
            case OPEN -> next == CLOSING || next == DRAINING;
            case CLOSING -> next == DRAINING;
            case DRAINING -> next == CLOSED || next == RELEASING;
            case RELEASING -> next == CLOSED;
            case CLOSED -> false;
        };
    }

    /** The state after a legal transition to {@code next}. */
    ChannelState moveTo(ChannelState next, String channel) {
        if (!canMoveTo(next)) {
            throw new IllegalStateException("channel " + channel + ": illegal transition " + this + " -> " + next);
        }
        return next;
    }

    /** Frames may still be queued and flushed. */
    boolean sends() {
        return this == OPEN || this == CLOSING;
    }

    /** Teardown has begun: receives are not reposted and nothing more is delivered. */
    boolean tearingDown() {
        return compareTo(CLOSING) > 0;
    }
}
