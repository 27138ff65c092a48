package dev.artemisrdma.transport.channel;

import java.net.InetSocketAddress;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.Endpoints;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.LogLimiter;
import dev.artemisrdma.transport.fabric.WcStatus;
import dev.artemisrdma.transport.loop.CompletionLoop;
import dev.artemisrdma.transport.stats.ChannelCounters;

/**
 * A channel's lifecycle: its {@link ChannelState} and every fact its teardown decides on (a close asked for, the
 * goodbye sent, the peer's disconnect and its drain, the cause, the deadlines), and every event that moves it: rdma_cm's
 * ESTABLISHED and DISCONNECTED, the peer's first frame, the handshake deadline, a failed connect or accept, a loop that
 * died, a close or forceClose, a failed post or completion, and the loop's progress through closing, draining and
 * release. Each move goes through {@link ChannelState#moveTo}, which refuses one the lifecycle does not have.
 *
 * <p>Owner: the channel's lock. Every method runs under it, whichever thread calls (writers, rdma_cm's event thread,
 * the transport's timer, the completion loop, closers), so no two threads ever decide a transition at once. The
 * exceptions are said so: {@link #state()}, {@link #peerDrain()} and {@link #acceptsWrites()} (volatile reads, for
 * the completion path and writers) and
 * {@link #awaitClosed} (which waits, so never under the lock). Release, which frees memory the receive side reads,
 * happens only on the loop thread ({@link #progress}), or where no loop thread polls for the channel any more.
 */
final class ChannelLifecycle {

    private static final Logger LOG = LoggerFactory.getLogger(ChannelLifecycle.class);
    // what a peer can make us log at will: LogLimiter.LINES lines per site and interval, then a summary
    private static final LogLimiter NOT_RELEASED = LogLimiter.site(LOG, Level.INFO,
            "channels not released within the close wait");
    private static final LogLimiter CLOSE_TIMED_OUT = LogLimiter.site(LOG, Level.WARN, "orderly closes that timed out");
    private static final LogLimiter FAILED = LogLimiter.site(LOG, Level.ERROR, "channels that failed");
    private static final LogLimiter UNDRAINED = LogLimiter.site(LOG, Level.WARN,
            "channels whose work did not complete after disconnect");
    private static final LogLimiter ENDED = LogLimiter.site(LOG, Level.INFO, "connections closed or lost by the peer");
    private static final long DRAIN_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(5);
    /** How long a teardown caused by flushes alone waits for the disconnect event that explains them. */
    private static final long FLUSH_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(200);
    /** What a closing caller waits beyond closeTimeout for the disconnect and release (done on the loop thread). */
    static final long CLOSE_GRACE_NANOS = TimeUnit.SECONDS.toNanos(1);

    private final String id;
    private final InetSocketAddress remote;
    private final TransportConfig config;
    private final SendSide send;
    private final ReceiveSide receive;
    private final SharedReceiveMembership shared;
    private final ChannelResources resources;
    /** Releases what the channel's work requests pointed at, then its memory and loop slot (see there). */
    private final Runnable release;
    private final CountDownLatch closed = new CountDownLatch(1);

    private volatile ChannelState state = ChannelState.CONNECTING;
    private FabricException cause;
    /** Written under the lock; read without it by {@link #acceptsWrites} (writers and Artemis ask often). */
    private volatile boolean closeRequested;
    private boolean goodbyeSent;
    private boolean closedNotified;
    /** The handler is not told of the close (it never saw the channel, or the caller gets the exception). */
    private boolean silent;
    /** The cause is only "work requests flushed": the disconnect event, if it comes in time, gives a better one. */
    private boolean causeIsFlush;
    /** The reason rdma_cm gave for the peer's disconnect, until the drain settles the cause. */
    private String peerDisconnect;
    /** The drain was begun by the peer's disconnect: successful receives are still delivered (loop thread reads). */
    private volatile boolean peerDrain;
    private boolean drainTimedOut;
    private long closeDeadline;
    private long drainDeadline;
    private long flushGraceDeadline;
    /**
     * The loop's poll count when a shared channel's drain was first checked, after the drain began; -1 before. The
     * drain is proven by a poll that began after it and found the queue drained.
     */
    private long drainFence = -1;
    /**
     * State moves made on a thread other than the channel's loop while it had one (under the lock): what is left of
     * the threads that move a channel besides its loop (issue 39: only the loop shall), for tests and debugState.
     */
    private int movesOffLoop;

    ChannelLifecycle(String id, InetSocketAddress remote, TransportConfig config, SendSide send, ReceiveSide receive,
                     SharedReceiveMembership shared, ChannelResources resources, Runnable release) {
        this.id = id;
        this.remote = remote;
        this.config = config;
        this.send = send;
        this.receive = receive;
        this.shared = shared;
        this.resources = resources;
        this.release = release;
    }

    /** The state now; any thread, without the lock (a volatile read). */
    ChannelState state() {
        return state;
    }

    /** Whether the peer began the drain, so that what it sent first is still delivered; any thread. */
    boolean peerDrain() {
        return peerDrain;
    }

    /** Open for writes: not closing, and no close asked for; any thread, without the lock (two volatile reads). */
    boolean acceptsWrites() {
        return state.compareTo(ChannelState.OPEN) <= 0 && !closeRequested;
    }

    FabricException cause() {
        return cause;
    }

    boolean drainTimedOut() {
        return drainTimedOut;
    }

    /**
     * Every state but OPEN has a deadline the loop's tick watches: a change made on another thread (a close, a
     * failure, a disconnect event) wakes the loop, which may be blocked without a timeout.
     */
    private void moveTo(ChannelState next) {
        state = state.moveTo(next, id);
        if (resources.loop() != null && !resources.onLoopThread()) {
            movesOffLoop++;
        }
        resources.wakeLoop();
    }

    /** See {@link #movesOffLoop}; under the lock. */
    int movesOffLoop() {
        return movesOffLoop;
    }

    // ------------------------------------------------------------------------------------------- establishment

    /** Established (rdma_cm's event, connect's return, or the peer's first frame): frames flow. */
    void established() {
        // the active side learns the peer's handshake when connect returns; an early event waits for it
        if (state == ChannelState.CONNECTING && send.isReady()) {
            moveTo(ChannelState.OPEN);
            LOG.debug("channel {} established: -> {}", id, describe(remote));
            flush(false);
            if (closeRequested && state == ChannelState.OPEN) {
                beginOrderlyClose();
            }
        }
    }

    /**
     * The peer's first frame arrived before rdma_cm's ESTABLISHED event (see the channel): whether it may open the
     * channel now (CONNECTING, the peer's handshake known, a queue pair to tell).
     */
    boolean mayOpenOnPeerFrame() {
        return state == ChannelState.CONNECTING && send.isReady() && resources.queuePair() != null;
    }

    /**
     * The handshake deadline passed (timer thread). Decided here, under the lock, so that the peer's first frame or
     * rdma_cm's ESTABLISHED, which open the channel under it, either came first (the deadline does nothing, and null
     * is returned) or come too late (the channel is already released).
     */
    FabricException expireHandshake(java.time.Duration timeout) {
        if (state != ChannelState.CONNECTING) {
            // opened by the peer's first frame before rdma_cm's ESTABLISHED event, or already failing for a reason
            // of its own: its teardown goes on, with that reason
            return null;
        }
        return new FabricException("connection " + id + " from " + describe(remote) + " did not complete its "
                + "handshake within " + timeout.toMillis() + " ms (raise handshakeTimeout); its queue pair and memory "
                + "are released");
    }

    /**
     * Connect or accept failed before the channel was established (or its loop died): the queue pair goes at once,
     * and the memory too when no loop thread will release it (no loop slot taken, or the loop is dead and polls
     * nothing any more); else the loop releases it at its next tick (RELEASING). A channel already RELEASING whose
     * loop is gone is released here: nobody else would. Returns whether it was released here.
     */
    boolean abort(FabricException why, boolean notifyHandler, boolean loopGone) {
        boolean noLoopWillRelease = !resources.bound() || loopGone || resources.loopFailed();
        if (state == ChannelState.CLOSED || (state == ChannelState.RELEASING && !noLoopWillRelease)) {
            return false;
        }
        if (state != ChannelState.RELEASING) {
            silent = !notifyHandler; // before any thread can see the channel closing
            if (state == ChannelState.OPEN || state == ChannelState.CLOSING) {
                beginDisconnect(why);
            }
            if (cause == null) {
                cause = why;
            }
            // never established, or established and failed: the fabric flushed nothing we wait for
            resources.destroyQueuePair();
        }
        if (noLoopWillRelease) {
            moveTo(ChannelState.CLOSED);
            release.run();
            return true;
        }
        moveTo(ChannelState.RELEASING);
        return false;
    }

    /**
     * The channel's loop died: nobody will poll its completions, so there is nothing to drain. Returns whether the
     * channel must be aborted (it has a queue pair, or waits for that loop to release it); one not attached yet is
     * refused when it attaches instead.
     */
    boolean loopFailed(FabricException why) {
        if (state == ChannelState.CLOSED || (resources.queuePair() == null && state != ChannelState.RELEASING)) {
            return false;
        }
        if (cause == null) {
            cause = why; // before the disconnect event can offer a lesser reason
        }
        resources.disconnect();
        return true;
    }

    /** Active side: the accept reply was not acceptable; the established connection is torn down properly. */
    void failHandshake(FabricException why) {
        silent = true; // the caller of connect gets the exception; the handler never saw this channel
        if (state.compareTo(ChannelState.CLOSING) <= 0) {
            beginDisconnect(why);
        }
    }

    /** Whether a queue pair may be attached: only while CONNECTING; else the reason it may not. */
    FabricException refusesQueuePair() {
        if (state == ChannelState.CONNECTING) {
            return null;
        }
        return new FabricException("channel " + id + " (" + describe(remote) + ") was " + state + " before its queue "
                + "pair was ready" + (cause == null ? "" : ": " + cause.getMessage()));
    }

    // ------------------------------------------------------------------------------------------------ closing

    /** Orderly close asked for: frames written go first, then the goodbye. */
    void requestClose() {
        if (!closeRequested && state.compareTo(ChannelState.CLOSING) < 0) {
            closeRequested = true;
            closeDeadline = System.nanoTime() + config.closeTimeout().toNanos();
            if (state == ChannelState.OPEN) {
                beginOrderlyClose();
            } else {
                // CONNECTING: established() or the connect's failure completes the close, or the deadline, which the
                // loop's tick watches from now on
                resources.wakeLoop();
            }
        }
    }

    /** Immediate close asked for: disconnect now if connected; a connecting channel is watched by the loop's tick. */
    void requestForceClose() {
        closeRequested = true;
        if (state.compareTo(ChannelState.CLOSING) <= 0 && resources.queuePair() != null) {
            beginDisconnect(null);
        } else {
            resources.wakeLoop();
        }
    }

    /** How long a closing caller waits at most: closeTimeout, and the grace for the disconnect and release. */
    long closeWaitNanos() {
        return config.closeTimeout().toNanos() + CLOSE_GRACE_NANOS;
    }

    /**
     * Blocks until released or {@code nanos} passed, unless called on the completion loop itself (which must go on
     * to do the release). Past the bound, teardown goes on in the loop; the caller does not wait for it. Never under
     * the lock.
     */
    void awaitClosed(long nanos) {
        if (resources.loop() == null || resources.onLoopThread() || state == ChannelState.CLOSED) {
            return;
        }
        try {
            if (!closed.await(nanos, TimeUnit.NANOSECONDS) && NOT_RELEASED.admit()) {
                LOG.info("channel {} ({}): not released within {} ms; it finishes in the background", id,
                        describe(remote), TimeUnit.NANOSECONDS.toMillis(nanos));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The rdma_cm DISCONNECTED event: the peer's last frames are still drained and delivered. */
    void peerDisconnected(String reason) {
        if (state == ChannelState.CLOSED || state == ChannelState.RELEASING
                || (state == ChannelState.DRAINING && !causeIsFlush)) {
            return; // our own disconnect coming back, or already failing
        }
        // The cause is settled when the drain ends, not here: the peer's last frames (its goodbye among them) may
        // still wait in the completion queue, and only the loop thread can tell whether they came.
        if (!closeRequested || !send.outboxEmpty()) {
            peerDisconnect = reason;
        }
        peerDrain = true; // what the peer sent before disconnecting is still delivered
        if (state == ChannelState.DRAINING) {
            cause = null; // the disconnect explains the flushes seen before it
            causeIsFlush = false;
            return;
        }
        beginDisconnect(null);
    }

    /**
     * What the closed channel's handler is told, once: the cause (null for a clean close), or null when it was told
     * already or is to be told nothing ({@link ClosedNotice#silent}).
     */
    ClosedNotice takeClosedNotice() {
        if (closedNotified) {
            return null;
        }
        closedNotified = true;
        return new ClosedNotice(cause, silent);
    }

    /** Whether the channel is released and its handler not yet told. */
    boolean releasedUntold() {
        return state == ChannelState.CLOSED && !closedNotified;
    }

    /** Releases the threads waiting in {@link #awaitClosed}; after the notice is taken, outside the lock. */
    void closedNotified() {
        closed.countDown();
    }

    record ClosedNotice(FabricException cause, boolean silent) {
    }

    FabricException closedException() {
        FabricException c = cause;
        return new FabricException("channel " + id + " to " + describe(remote) + " is closed"
                + (c == null ? "" : ": " + c.getMessage()), c);
    }

    // ------------------------------------------------------------------------------------------------- progress

    /**
     * Sends what may go. Before the connection is established frames wait in the outbox; a failed post fails the
     * channel. {@code writer}: a flush the application asked for (write, flush), which may wait behind a SEND in
     * flight.
     */
    void flush(boolean writer) {
        // the goodbye is the last SEND: the close waits for the ring to drain, and only the goodbye's completion
        // retires it; a credit frame after it (credit owed for what the peer sent meanwhile) would be unsignaled,
        // nothing would retire it, and the close would sit out closeTimeout. The peer needs no credit from us now.
        if (!state.sends() || goodbyeSent) {
            return;
        }
        FabricException failed = send.flush(writer);
        if (failed != null) {
            fail(failed);
        }
    }

    /**
     * Whether the loop must tick this channel soon: it is not simply open (connecting, closing, draining, released),
     * a close was asked for, frames wait in the outbox, or a frame is half reassembled.
     */
    boolean deadlineRunning() {
        return state != ChannelState.OPEN || closeRequested || !send.outboxEmpty() || receive.reassembling();
    }

    /** What a batch of completions ends in: a protocol error, a failed completion, or flushes (the queue pair died). */
    void applyBatchOutcome(ChannelCounters counters) {
        FabricException protocolError = receive.batchProtocolError();
        if (protocolError != null) {
            counters.protocolError();
            fail(protocolError);
        } else if (receive.batchFailureStatus() >= 0) {
            fail(completionFailure(receive.batchFailureStatus(), receive.batchFailureWhat()));
        } else if (receive.batchFlushed() && !state.tearingDown()) {
            if (receive.remoteClosing()) {
                beginDisconnect(new FabricException("channel " + id + ": peer " + describe(remote)
                        + " closed the connection"));
            } else {
                // flushes alone: the queue pair went to error, most likely a disconnect whose event is on its way;
                // teardown waits a moment for it, so its reason can replace this one
                LOG.debug("channel {} ({}): work requests flushed before any disconnect event", id, describe(remote));
                beginDisconnect(new FabricException("channel " + id + " (" + describe(remote)
                        + "): work requests flushed: the queue pair went to error"));
                causeIsFlush = true;
                flushGraceDeadline = System.nanoTime() + FLUSH_GRACE_NANOS;
            }
        }
    }

    /**
     * The loop's periodic look (loop thread): a frame overdue in reassembly, a peer that has taken nothing for
     * unwritableTimeout, a connect closed before it was up.
     */
    void tick(long now) {
        FabricException overdue = state.tearingDown() ? null : receive.overdueFrame(now);
        if (overdue != null) {
            fail(overdue); // logs it
        }
        if (state == ChannelState.OPEN && !closeRequested) {
            failIfStuck(now);
        }
        if (state == ChannelState.CONNECTING && closeRequested && resources.queuePair() != null
                && now - closeDeadline > 0) {
            beginDisconnect(null); // closed before it was established, and it never was
        }
        progress(now);
    }

    /**
     * Fails the channel once it stayed unwritable for unwritableTimeout with no data leaving: a writer that honours
     * isWritable would otherwise wait for ever (Artemis's replication among them: its slow-replication detection
     * works on Netty connections only), and one that does not would fill maxQueuedBytesPerConnection.
     */
    private void failIfStuck(long now) {
        long stalled = send.unwritableStallNanos(now);
        long bound = config.unwritableTimeout().toNanos();
        if (bound > 0 && stalled > bound) {
            fail(new FabricException("channel " + id + " (peer " + describe(remote) + "): unwritable for "
                    + TimeUnit.NANOSECONDS.toMillis(stalled) + " ms with no frame leaving (the peer grants no credit or "
                    + "acknowledges nothing), past unwritableTimeout (" + config.unwritableTimeout().toMillis()
                    + " ms; raise it, or 0 to wait for ever): the connection fails"));
        }
    }

    /** As {@link #progress(long)}; an open channel only flushes, without reading the clock (once per batch). */
    void progress() {
        if (state == ChannelState.OPEN) {
            flush(false);
            if (state == ChannelState.OPEN) {
                return;
            }
        }
        progress(System.nanoTime());
    }

    /**
     * Moves the channel on: flushes, then advances closing or draining, whose deadlines use {@code now}; a channel
     * that is done is released. Called on the loop thread only (endOfBatch, tick), which is what makes the release
     * safe against the receive side.
     */
    private void progress(long now) {
        if (state.sends()) {
            flush(false);
        }
        if (state == ChannelState.CLOSING) {
            progressOrderlyClose(now);
        }
        if (state == ChannelState.DRAINING && isDrained(now)) {
            finishTeardown();
        } else if (state == ChannelState.RELEASING) {
            moveTo(ChannelState.CLOSED);
            release.run();
        }
    }

    private void beginOrderlyClose() {
        send.markFlushed(); // what was written goes before the goodbye, flushed or not
        moveTo(ChannelState.CLOSING);
        flush(false);
        if (state == ChannelState.CLOSING) {
            progressOrderlyClose(System.nanoTime());
        }
    }

    /**
     * Closing: pending frames go first, then a signaled goodbye (which also retires any unsignaled sends before it),
     * the last SEND ({@link #flush} posts nothing after it); once every send is known complete, disconnect. Bounded
     * by closeTimeout.
     */
    private void progressOrderlyClose(long now) {
        if (send.outboxEmpty()) {
            if (!goodbyeSent && send.goodbyeAffordable()) {
                goodbyeSent = true;
                FabricException failed = send.sendGoodbye();
                if (failed != null) {
                    fail(failed);
                    return;
                }
            }
            // Without credit the goodbye waits: the peer owes us the receives our last SENDs consumed and returns
            // them at its threshold (the last credit is only ever spent on a SEND that returns credit, so it has
            // credit to do so). Disconnecting at once made the peer read a lost connection instead of a close. A
            // peer that said goodbye itself needs none from us: with no credit left (the send that spent the last
            // one was signaled, so the ring still drains) we disconnect.
            boolean peerClosedAndNoCredit = receive.remoteClosing() && send.credits().sendCredits() == 0;
            if ((goodbyeSent || peerClosedAndNoCredit) && send.ringOutstanding() == 0
                    && state == ChannelState.CLOSING) {
                beginDisconnect(null);
            }
        }
        if (state == ChannelState.CLOSING && now - closeDeadline > 0) {
            String unsent = send.outboxEmpty() ? "no credit came back for the goodbye"
                    : send.outboxSize() + " frames unsent";
            if (CLOSE_TIMED_OUT.admit()) {
                LOG.warn("channel {} ({}): orderly close timed out after closeTimeout ({} ms), {}; disconnecting", id,
                        describe(remote), config.closeTimeout().toMillis(), unsent);
            }
            beginDisconnect(send.outboxEmpty() ? null : new FabricException("channel " + id
                    + ": close timed out with " + send.outboxSize() + " frames unsent to " + describe(remote)));
        }
    }

    /** The channel failed: logged (unless the peer was closing anyway), and disconnected with the cause. */
    void fail(FabricException why) {
        if (state.tearingDown()) {
            return;
        }
        if (receive.remoteClosing()) {
            why = new FabricException("channel " + id + ": peer " + describe(remote) + " closed the connection", why);
        } else if (FAILED.admit()) {
            LOG.error("{}", why.getMessage());
        }
        beginDisconnect(why);
    }

    private FabricException completionFailure(int status, String what) {
        return new FabricException("channel " + id + " (" + describe(remote) + "): " + what + " failed with "
                + WcStatus.name(status) + ": " + WcStatus.meaning(status));
    }

    /** Disconnect: every outstanding work request now completes (flushes); queued frames are dropped. */
    private void beginDisconnect(FabricException why) {
        if (cause == null) {
            cause = why;
        }
        moveTo(ChannelState.DRAINING);
        drainDeadline = System.nanoTime() + DRAIN_TIMEOUT_NANOS;
        // queued frames are dropped only at release: a partly posted one is still pointed at by sends
        send.stopWriting();
        resources.disconnect();
    }

    /**
     * Every receive has come back, and every signaled send (an unsignaled one that already succeeded produces no
     * completion, but is retired by the signaled one after it or is done anyway).
     */
    private boolean isDrained(long now) {
        if (causeIsFlush && now - flushGraceDeadline < 0) {
            return false;
        }
        if (resources.queuePair() == null || (resources.receivesOutstanding() <= 0
                && send.signaledOutstanding() == 0 && sharedReceivesSettled())) {
            return true;
        }
        if (now - drainDeadline > 0) {
            drainTimedOut = true;
            if (UNDRAINED.admit()) {
                LOG.warn("channel {} ({}): {} receives and {} signaled sends did not complete after disconnect; "
                        + "destroying the queue pair anyway", id, describe(remote), resources.receivesOutstanding(),
                        send.signaledOutstanding());
            }
            return true;
        }
        return false;
    }

    /**
     * On the shared pool, no receive of ours is flushed to mark the end of the peer's SENDs: their completions sit in
     * the loop's queue, ahead of the disconnect that started this drain. Drained once a poll that began after the
     * first look here (loop thread, so after the drain began) found the queue drained: a frame the peer sent before
     * closing is never dropped. A poll that began earlier proves nothing, even one that ends after this look (the
     * batch being handled now): the peer's last SENDs may have completed after it began.
     */
    private boolean sharedReceivesSettled() {
        CompletionLoop loop = resources.loop();
        if (!shared.isMember() || loop == null || loop.failure() != null) {
            return true;
        }
        if (drainFence < 0) {
            drainFence = loop.pollsBegun();
            return false;
        }
        return loop.drainedSince(drainFence);
    }

    /** Destroy the queue pair, then release what its work requests pointed at, then the connection's memory. */
    private void finishTeardown() {
        settlePeerDisconnect();
        moveTo(ChannelState.CLOSED);
        resources.destroyQueuePair();
        release.run();
        LOG.debug("channel {} closed{}", id, cause == null ? "" : ": " + cause.getMessage());
    }

    /** After the drain: a peer's disconnect is an orderly close if its goodbye arrived, else a lost connection. */
    private void settlePeerDisconnect() {
        if (peerDisconnect == null || (cause != null && !causeIsFlush)) {
            return;
        }
        cause = new FabricException(receive.remoteClosing()
                ? "channel " + id + ": peer " + describe(remote) + " closed the connection"
                : "channel " + id + ": connection to " + describe(remote) + " lost: " + peerDisconnect);
        causeIsFlush = false;
        peerDisconnect = null;
        if (ENDED.admit()) {
            LOG.info("{}", cause.getMessage());
        }
    }

    private static String describe(InetSocketAddress a) {
        return Endpoints.describe(a);
    }

    @Override
    public String toString() {
        return state.toString();
    }
}
