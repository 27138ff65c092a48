package dev.artemisrdma.transport.channel;

import java.time.Duration;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

import dev.artemisrdma.transport.fabric.LogLimiter;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairEvents;

/**
 * The deadline of one accepted connection's handshake. An accepted queue pair, its memory and its completion queue
 * entries exist before the peer completes the handshake (rdma_cm's RTU); a peer that never completes it would hold
 * them for as long as rdma_cm keeps retrying, or for ever. Past {@code handshakeTimeout} the channel is torn down.
 * Whichever comes first, the established event (or the peer's first frame, which opens the channel before it) or
 * the deadline, wins; the other does nothing.
 */
public final class HandshakeDeadline implements QueuePairEvents {

    private static final Logger LOG = LoggerFactory.getLogger(HandshakeDeadline.class);
    private static final LogLimiter RELEASE_FAILED = LogLimiter.site(LOG, Level.ERROR,
            "connections whose release at the handshake deadline failed");

    private final RdmaChannelImpl channel;
    private final QueuePairEvents events;
    private final AtomicBoolean pending = new AtomicBoolean(true);
    private final Duration timeout;
    private final ScheduledFuture<?> expiry;
    /** Run once when the handshake ends, however it ends (the backlog's place is given back). */
    private final Runnable onEnd;

    public HandshakeDeadline(RdmaChannelImpl channel, QueuePairEvents events, Duration timeout,
                             ScheduledExecutorService timer, Runnable onEnd) {
        this.channel = channel;
        this.events = events;
        this.timeout = timeout;
        this.onEnd = onEnd;
        this.expiry = timer.schedule(this::expire, timeout.toNanos(), TimeUnit.NANOSECONDS);
    }

    @Override
    public void established(QueuePair queuePair) {
        cancel();
        events.established(queuePair);
    }

    @Override
    public void disconnected(QueuePair queuePair, String reason) {
        cancel();
        events.disconnected(queuePair, reason);
    }

    /** The handshake ended some other way (accept failed, established, disconnected). */
    public void cancel() {
        if (pending.compareAndSet(true, false)) {
            expiry.cancel(false);
            onEnd.run();
        }
    }

    private void expire() {
        if (!pending.compareAndSet(true, false)) {
            return;
        }
        try {
            channel.expireHandshake(timeout); // decided under the channel's lock, against the first frame
        } catch (RuntimeException | Error e) {
            if (RELEASE_FAILED.admit()) { // a peer that never completes its handshake gets here at will
                LOG.error("releasing connection {} after its handshake deadline failed", channel.id(), e);
            }
        } finally {
            onEnd.run();
        }
    }
}
