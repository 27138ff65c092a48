package dev.artemisrdma.transport.channel;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

import dev.artemisrdma.transport.fabric.LogLimiter;

/**
 * The log of a channel's parts: one category, {@code RdmaChannelImpl}'s, whichever part logs (as before the channel
 * was split into them, so a logging configuration that names it still sees every line), and the limited sites of
 * what a peer can make a channel log at will: {@link LogLimiter#LINES} lines per site and interval, then a summary.
 * Stateless but for the sites' counts (each its own monitor); any thread.
 */
final class ChannelLog {

    static final Logger LOG = LoggerFactory.getLogger(RdmaChannelImpl.class);
    static final LogLimiter NOT_PACKED = LogLimiter.site(LOG, Level.INFO,
            "connections whose peer does not read packed SENDs");
    static final LogLimiter HANDSHAKE_EXPIRED = LogLimiter.site(LOG, Level.WARN,
            "handshakes that passed their deadline");
    static final LogLimiter HANDLER_FAILED = LogLimiter.site(LOG, Level.ERROR,
            "frames the handler failed on");
    // the application's other callbacks may fail on what a peer sent (onEndOfBatch after its frames), or on every
    // connection a peer opens and closes (onClosed): as often as the peer likes (issue 37, hole 7)
    static final LogLimiter CALLBACK_FAILED = LogLimiter.site(LOG, Level.ERROR,
            "handler callbacks (end of batch, writable) that failed");
    static final LogLimiter ON_CLOSED_FAILED = LogLimiter.site(LOG, Level.ERROR,
            "onClosed callbacks that failed");

    private ChannelLog() {
    }
}
