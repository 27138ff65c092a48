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
 * the deadline, wins; the other does nothing. The timer only asks: the channel's loop carries the expiry out
 * ({@link LoopSide#runCommands}), after an ESTABLISHED that reached the channel first. The handshake
 * backlog's place is given back here when the handshake succeeds; when it fails or expires, the transport gives it
 * back once the channel's queue pair and rdma_cm id are destroyed, so that a source never holds more unfinished queue
 * pairs in the kernel than its cap, not even while rxe spends seconds in a destroy or a peer that drops CM messages
 * holds its id for a minute.
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
    /** Gives the backlog's place back when the handshake succeeded (idempotent). */
    private final Runnable onEstablished;
    /**
     * Tells the backlog the deadline passed: once given back by the channel's release, its place cools down; given
     * back by {@code onEstablished} (the channel opened after all), it does not.
     */
    private final Runnable onExpired;

    public HandshakeDeadline(RdmaChannelImpl channel, QueuePairEvents events, Duration timeout,
                             ScheduledExecutorService timer, Runnable onEstablished, Runnable onExpired) {
        this.channel = channel;
        this.events = events;
        this.timeout = timeout;
        this.onEstablished = onEstablished;
        this.onExpired = onExpired;
        this.expiry = timer.schedule(this::expire, timeout.toNanos(), TimeUnit.NANOSECONDS);
    }

    @Override
    public void established(QueuePair queuePair) {
        if (end()) {
            onEstablished.run();
        }
        events.established(queuePair);
    }

    @Override
    public void disconnected(QueuePair queuePair, String reason) {
        failed();
        events.disconnected(queuePair, reason);
    }

    /**
     * The handshake failed some other way (the accept failed, or the peer went before it finished): the deadline
     * stops; the backlog's place is not given back here but by the channel's close, once its queue pair is gone.
     */
    public void failed() {
        end();
    }

    /** Ends the handshake once: true for the caller that ended it, whose outcome it is; the deadline stops. */
    private boolean end() {
        if (!pending.compareAndSet(true, false)) {
            return false;
        }
        expiry.cancel(false);
        return true;
    }

    /** Timer thread: the deadline passed first; the channel's loop decides what it means ({@link #applyExpiry}). */
    private void expire() {
        if (!end()) { // (cancelling the expiry that runs this does nothing)
            return;
        }
        channel.handshakeExpired(this);
    }

    /**
     * On the channel's loop (or where it has none): the channel is torn down unless it opened meanwhile (rdma_cm's
     * ESTABLISHED, run before this, or the peer's first frame); an open one gives the backlog's place back here. One
     * that was already failing for a reason of its own (its loop failed, its receives flushed, a DISCONNECTED handled
     * first) keeps its place until its close finds its queue pair gone: giving it back here let a flooding source
     * hold more queue pairs than its cap while rxe destroyed the first ones (the CI lab's 66 of 64).
     */
    void applyExpiry() {
        onExpired.run(); // first: the channel's release may give the place back before expireHandshake returns
        boolean opened;
        try {
            opened = channel.expireHandshake(timeout);
        } catch (RuntimeException | Error e) {
            if (RELEASE_FAILED.admit()) { // a peer that never completes its handshake gets here at will
                LOG.error("releasing connection {} after its handshake deadline failed", channel.id(), e);
            }
            opened = true; // what is left of it is unknown: never keep a place that nothing may give back
        }
        if (opened) {
            onEstablished.run(); // the peer has spoken: the channel is open, as if rdma_cm had said so
        }
    }
}
