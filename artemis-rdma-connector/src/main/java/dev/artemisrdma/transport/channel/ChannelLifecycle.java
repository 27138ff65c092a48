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
 * A channel's lifecycle: its {@link ChannelState}, the one deadline that state holds, its {@link Outcome}, and every
 * event that moves it: rdma_cm's ESTABLISHED and DISCONNECTED, the peer's first frame, the handshake deadline, a failed
 * connect or accept, a loop that died, a close or forceClose, a failed post or completion, and the loop's progress
 * through closing, draining and release. Each move goes through {@link #moveTo}, which sets the new state's deadline,
 * and {@link ChannelState#moveTo}, which refuses a move the lifecycle does not have. What a close waits for is the
 * state (a close asked while connecting, the goodbye sent, flushes awaiting their event, the peer's drain), not a flag
 * beside it; what a state needs to know besides is its datum, said at its field (FLUSHED_AWAITING_EVENT's,
 * PEER_DRAINING's and the drains').
 *
 * <p>Owner: the channel's lock. Every method runs under it, whichever thread calls (writers, rdma_cm's event thread,
 * the transport's timer, the completion loop, closers), so no two threads ever decide a transition at once. The
 * exceptions are said so: {@link #state()} and {@link #acceptsWrites()} (a volatile read, for the completion path
 * and writers), the readers of monitoring and tests ({@link #cause}, {@link #drainTimedOut}, {@link #movesOffLoop},
 * {@link #path}: each a field written where it changes, before the state it belongs to, so a reader that saw a state
 * sees them as that state left them) and {@link #awaitClosed} (which waits, so never under the lock). Release, which frees memory the
 * receive side reads, happens only on the loop thread ({@link #progress}), or where no loop thread polls for the
 * channel any more.
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
    /** The deadline of a state that holds none (see {@link ChannelState.Deadline}). */
    private static final long NONE = 0;

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

    /** Read without the lock by writers ({@link #acceptsWrites}) and the receive side (PEER_DRAINING delivers). */
    private volatile ChannelState state = ChannelState.CONNECTING;
    /** The state's deadline ({@link ChannelState#deadline}), a {@link System#nanoTime} set on entering it. */
    private long deadline = NONE;
    private final Outcome outcome = new Outcome();
    private boolean closedNotified;
    /**
     * FLUSHED_AWAITING_EVENT's datum: a close was asked before the flushes (or a forceClose since), so the event
     * that comes answers our own close and names no reason unless frames were left unsent.
     */
    private boolean flushedWhileClosing;
    /** PEER_DRAINING's datum: the reason rdma_cm gave, until the drain settles "closed" or "lost"; null: our close. */
    private String peerDisconnect;
    /**
     * The draining states' datum: the loop's poll count when a shared channel's drain was first checked, after the
     * drain began; -1 before. The drain is proven by a poll that began after it and found the queue drained.
     */
    private long drainFence = -1;
    /**
     * The states this channel has been in, one bit each: every move goes forward ({@link ChannelState#canMoveTo}),
     * so the set is the path (debugState, tests).
     */
    private int path = ChannelState.CONNECTING.bit();
    /**
     * State moves made on a thread other than the channel's loop while it had one: what is left of the threads that
     * move a channel besides its loop (issue 39: only the loop shall), for tests and debugState. Counted under the
     * lock (one writer at a time), read without it: volatile.
     */
    private volatile int movesOffLoop;
    /**
     * A writer's failure that the loop has not applied yet (a post refused on the writer's thread, the outbox over its
     * cap): set once, under the lock, by the first writer that failed, and never cleared. From then on the channel
     * takes no write and posts nothing; the loop fails it with this cause ({@link #applyWriterFailure}) when it runs
     * the writer's request ({@link ChannelCommands#WRITER_FAILED}). Read by writers without the lock: volatile.
     */
    private volatile FabricException writerFailure;

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

    /**
     * Open for writes: connecting or open, no close asked for (a close moves OPEN on at once); any thread, without
     * the lock (a volatile read). The writers' gate, set by the closing thread itself, refuses before this knows.
     */
    boolean acceptsWrites() {
        ChannelState s = state;
        return (s == ChannelState.CONNECTING || s == ChannelState.OPEN) && writerFailure == null;
    }

    /** See {@link #writerFailure}; any thread, without the lock (a volatile read). */
    FabricException writerFailure() {
        return writerFailure;
    }

    /** The cause decided so far (see {@link Outcome}); any thread, without the lock (a volatile read). */
    FabricException cause() {
        return outcome.cause;
    }

    /** See {@link Outcome}; any thread, without the lock (a volatile read). */
    boolean drainTimedOut() {
        return outcome.drainTimedOut;
    }

    /**
     * Moves to {@code next}, which holds {@code deadline} ({@link #NONE} for a state without one). Every state but
     * OPEN has something the loop's tick watches: a change made on another thread (a failure, an abort) wakes the
     * loop, which may be blocked without a timeout.
     */
    private void moveTo(ChannelState next, long deadline) {
        ChannelState moved = state.moveTo(next, id);
        this.deadline = deadline;
        path |= next.bit(); // before the volatile write: a thread that reads the state sees the path up to it
        if (resources.loop() != null && !resources.onLoopThread()) {
            movesOffLoop++; // before the state too: a reader that saw the state sees the move counted
        }
        state = moved;
        resources.wakeLoop();
    }

    /**
     * The states this channel went through, in order ("CONNECTING>OPEN>..."); under the lock, or after {@link #state}
     * was read (the path up to that state is then seen).
     */
    String path() {
        return ChannelState.path(path);
    }

    /**
     * Whether the channel was ever established: OPEN, or FLUSHING reached from a close asked while connecting (its
     * only way in besides OPEN). Under the lock.
     */
    boolean everEstablished() {
        return (path & (ChannelState.OPEN.bit() | ChannelState.FLUSHING.bit())) != 0;
    }

    /** See {@link #movesOffLoop}; any thread, without the lock (a volatile read). */
    int movesOffLoop() {
        return movesOffLoop;
    }

    // ------------------------------------------------------------------------------------------- establishment

    /**
     * Established (rdma_cm's event, connect's return, or the peer's first frame): frames flow, or, when a close was
     * asked meanwhile, the close goes on with its deadline: what was flushed first leaves first, as on an open channel.
     */
    void established() {
        // the active side learns the peer's handshake when connect returns; an early event waits for it
        if (!state.connecting() || !send.isReady()) {
            return;
        }
        if (state == ChannelState.CONNECTING) {
            moveTo(ChannelState.OPEN, NONE);
            LOG.debug("channel {} established: -> {}", id, describe(remote));
            postWhatMayGo();
            return;
        }
        moveTo(ChannelState.FLUSHING, deadline);
        LOG.debug("channel {} established, closing: -> {}", id, describe(remote));
        postWhatMayGo();
        if (state == ChannelState.FLUSHING) {
            continueOrderlyClose();
        }
    }

    /**
     * The peer's first frame arrived before rdma_cm's ESTABLISHED event (see the channel): whether it may open the
     * channel now (CONNECTING, the peer's handshake known, a queue pair to tell).
     */
    boolean mayOpenOnPeerFrame() {
        return state.connecting() && send.isReady() && resources.queuePair() != null;
    }

    /**
     * The handshake deadline passed (timer thread). Decided here, under the lock, so that the peer's first frame or
     * rdma_cm's ESTABLISHED, which open the channel under it, either came first (the deadline does nothing, and null
     * is returned) or come too late (the channel is already released).
     */
    FabricException expireHandshake(java.time.Duration timeout) {
        if (!state.connecting()) {
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
            outcome.silent = !notifyHandler; // before any thread can see the channel closing
            if (state == ChannelState.OPEN || state.closing()) {
                beginDisconnect(why, ChannelState.DRAINING);
            }
            outcome.decide(why);
            // never established, or established and failed: the fabric flushed nothing we wait for
            resources.destroyQueuePair();
        }
        if (noLoopWillRelease) {
            moveTo(ChannelState.CLOSED, NONE);
            release.run();
            return true;
        }
        moveTo(ChannelState.RELEASING, NONE);
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
        outcome.decide(why); // before the disconnect event can offer a lesser reason
        resources.disconnect();
        return true;
    }

    /** Active side: the accept reply was not acceptable; the established connection is torn down properly. */
    void failHandshake(FabricException why) {
        outcome.silent = true; // the caller of connect gets the exception; the handler never saw this channel
        if (!state.tearingDown()) {
            beginDisconnect(why, ChannelState.DRAINING);
        }
    }

    /** Whether a queue pair may be attached: only while CONNECTING; else the reason it may not. */
    FabricException refusesQueuePair() {
        if (state.connecting()) {
            return null;
        }
        FabricException cause = outcome.cause;
        return new FabricException("channel " + id + " (" + describe(remote) + ") was " + state + " before its queue "
                + "pair was ready" + (cause == null ? "" : ": " + cause.getMessage()));
    }

    // ------------------------------------------------------------------------------------------------ closing

    /** Orderly close asked for: frames written go first, then the goodbye; a second close changes nothing. */
    void requestClose() {
        long closeBy = System.nanoTime() + config.closeTimeout().toNanos();
        if (state == ChannelState.OPEN) {
            send.markFlushed(); // what was written goes before the goodbye, flushed or not
            moveTo(ChannelState.FLUSHING, closeBy);
            continueOrderlyClose();
        } else if (state == ChannelState.CONNECTING) {
            // established() or the connect's failure completes the close, or the deadline, which the loop's tick
            // watches from now on
            moveTo(ChannelState.CONNECTING_CLOSE_ASKED, closeBy);
        }
    }

    /**
     * Immediate close asked for: disconnect now if connected; a connecting channel without its queue pair yet is
     * watched by the loop's tick, its close due at once (unless a close asked before set its deadline).
     */
    void requestForceClose() {
        if (!state.tearingDown() && resources.queuePair() != null) {
            beginDisconnect(null, ChannelState.DRAINING);
        } else if (state == ChannelState.CONNECTING) {
            moveTo(ChannelState.CONNECTING_CLOSE_ASKED, System.nanoTime() - 1);
        } else {
            if (state == ChannelState.FLUSHED_AWAITING_EVENT) {
                flushedWhileClosing = true; // the event now answers our own close
            }
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

    /** The rdma_cm DISCONNECTED event: the peer's last frames are still drained and delivered (PEER_DRAINING). */
    void peerDisconnected(String reason) {
        if (state.tearingDown() && state != ChannelState.FLUSHED_AWAITING_EVENT) {
            return; // our own disconnect coming back, or already failing
        }
        // The cause is settled when the drain ends, not here: the peer's last frames (its goodbye among them) may
        // still wait in the completion queue, and only the loop thread can tell whether they came.
        boolean closeAsked = state == ChannelState.CONNECTING_CLOSE_ASKED || state.closing()
                || (state == ChannelState.FLUSHED_AWAITING_EVENT && flushedWhileClosing);
        peerDisconnect = !closeAsked || !send.outboxEmpty() ? reason : null;
        if (state == ChannelState.FLUSHED_AWAITING_EVENT) {
            outcome.cause = null; // the disconnect explains the flushes seen before it
            // the drain began with the flushes: its bound counts from then
            moveTo(ChannelState.PEER_DRAINING, deadline - FLUSH_GRACE_NANOS + DRAIN_TIMEOUT_NANOS);
            return;
        }
        beginDisconnect(null, ChannelState.PEER_DRAINING);
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
        return new ClosedNotice(outcome.cause, outcome.silent);
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
        FabricException c = outcome.cause != null ? outcome.cause : writerFailure;
        return new FabricException("channel " + id + " to " + describe(remote) + " is closed"
                + (c == null ? "" : ": " + c.getMessage()), c);
    }

    // ------------------------------------------------------------------------------------------------- progress

    /**
     * Sends what may go. Before the connection is established frames wait in the outbox; a failed post fails the
     * channel ({@link #writerFailed}: on a writer's thread the loop does it). {@code writer}: a flush the application
     * asked for (write, flush), which may wait behind a SEND in flight. Returns true when a writer's failure waits
     * for the loop: the caller tells it once it has released the lock ({@link ChannelCommands#writerFailed}).
     */
    boolean flush(boolean writer) {
        FabricException failed = postOutbox(writer);
        return failed != null && writerFailed(failed);
    }

    /** Posts what may go, if anything may: why the post failed, or null. */
    private FabricException postOutbox(boolean writer) {
        // the goodbye is the last SEND: the close waits for the ring to drain, and only the goodbye's completion
        // retires it; a credit frame after it (credit owed for what the peer sent meanwhile) would be unsignaled,
        // nothing would retire it, and the close would sit out closeTimeout. The peer needs no credit from us now.
        // Nothing goes after a writer's failure either: the channel fails as soon as its loop looks.
        if (!state.sends() || writerFailure != null) {
            return null;
        }
        return send.flush(writer);
    }

    /**
     * A failure met by a writer (a refused post, the outbox over its cap), under the lock. On the loop thread, or
     * where no loop owns the channel yet, the channel fails at once. On any other thread it is only recorded: the
     * channel takes no more writes and posts nothing, and the writer, once it has released the lock, asks the loop to
     * fail it ({@link ChannelCommands#writerFailed}); so only the loop moves the state (issue 39), and the close and
     * the handler's notice never run under a writer's lock. Returns true when the caller must ask.
     */
    boolean writerFailed(FabricException why) {
        if (resources.loop() == null || resources.onLoopThread()) {
            fail(why);
            return false;
        }
        if (writerFailure != null || state.tearingDown()) {
            return false; // the first failure is the cause; a channel already going needs no second one
        }
        writerFailure = why;
        return true;
    }

    /**
     * The channel's own progress (established, a close's goodbye, the loop's tick): posts what may go; a failed post
     * fails the channel on this thread, which is the loop's, or the asking thread's where no loop runs the channel.
     */
    private void postWhatMayGo() {
        FabricException failed = postOutbox(false);
        if (failed != null) {
            fail(failed);
        }
    }

    /** Loop thread, under the lock: the writer's failure ({@link #writerFailure}) fails the channel. */
    void applyWriterFailure() {
        FabricException why = writerFailure;
        if (why != null) {
            fail(why);
        }
    }

    /**
     * Whether the loop must tick this channel soon: it is not simply open (connecting, closing, draining, released),
     * frames wait in the outbox, or a frame is half reassembled.
     */
    boolean deadlineRunning() {
        return state != ChannelState.OPEN || !send.outboxEmpty() || receive.reassembling();
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
                        + " closed the connection"), ChannelState.DRAINING);
            } else {
                // flushes alone: the queue pair went to error, most likely a disconnect whose event is on its way;
                // teardown waits a moment for it, so its reason can replace this one
                LOG.debug("channel {} ({}): work requests flushed before any disconnect event", id, describe(remote));
                flushedWhileClosing = state == ChannelState.CONNECTING_CLOSE_ASKED || state.closing();
                beginDisconnect(new FabricException("channel " + id + " (" + describe(remote)
                        + "): work requests flushed: the queue pair went to error"),
                        ChannelState.FLUSHED_AWAITING_EVENT);
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
        if (state == ChannelState.OPEN) {
            failIfStuck(now);
        }
        if (state == ChannelState.CONNECTING_CLOSE_ASKED && resources.queuePair() != null && now - deadline > 0) {
            beginDisconnect(null, ChannelState.DRAINING); // closed before it was established, and it never was
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
            postWhatMayGo();
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
            postWhatMayGo();
        }
        if (state.closing()) {
            progressOrderlyClose(now);
        }
        if (state.draining() && isDrained(now)) {
            finishTeardown();
        } else if (state == ChannelState.RELEASING) {
            moveTo(ChannelState.CLOSED, NONE);
            release.run();
        }
    }

    /** FLUSHING, just entered: what was written goes, then the goodbye if it may. */
    private void continueOrderlyClose() {
        send.markFlushed(); // what was written goes before the goodbye, flushed or not
        postWhatMayGo();
        if (state == ChannelState.FLUSHING) {
            progressOrderlyClose(System.nanoTime());
        }
    }

    /**
     * Closing: pending frames go first (FLUSHING), then a signaled goodbye (which also retires any unsignaled sends
     * before it), the last SEND (GOODBYE_SENT: {@link #flush} posts nothing after it); once every send is known
     * complete, disconnect. Bounded by closeTimeout, the deadline both states hold.
     */
    private void progressOrderlyClose(long now) {
        if (send.outboxEmpty()) {
            if (state == ChannelState.FLUSHING && send.goodbyeAffordable()) {
                moveTo(ChannelState.GOODBYE_SENT, deadline);
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
            if ((state == ChannelState.GOODBYE_SENT || (state == ChannelState.FLUSHING && peerClosedAndNoCredit))
                    && send.ringOutstanding() == 0) {
                beginDisconnect(null, ChannelState.DRAINING);
            }
        }
        if (state.closing() && now - deadline > 0) {
            String unsent = send.outboxEmpty() ? "no credit came back for the goodbye"
                    : send.outboxSize() + " frames unsent";
            if (CLOSE_TIMED_OUT.admit()) {
                LOG.warn("channel {} ({}): orderly close timed out after closeTimeout ({} ms), {}; disconnecting", id,
                        describe(remote), config.closeTimeout().toMillis(), unsent);
            }
            beginDisconnect(send.outboxEmpty() ? null : new FabricException("channel " + id
                    + ": close timed out with " + send.outboxSize() + " frames unsent to " + describe(remote)),
                    ChannelState.DRAINING);
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
        beginDisconnect(why, ChannelState.DRAINING);
    }

    private FabricException completionFailure(int status, String what) {
        return new FabricException("channel " + id + " (" + describe(remote) + "): " + what + " failed with "
                + WcStatus.name(status) + ": " + WcStatus.meaning(status));
    }

    /**
     * Disconnect: every outstanding work request now completes (flushes); queued frames are dropped. {@code drain}:
     * DRAINING, PEER_DRAINING (the peer began it) or FLUSHED_AWAITING_EVENT (flushes began it).
     */
    private void beginDisconnect(FabricException why, ChannelState drain) {
        outcome.decide(why);
        long now = System.nanoTime();
        moveTo(drain, drain == ChannelState.FLUSHED_AWAITING_EVENT ? now + FLUSH_GRACE_NANOS
                : now + DRAIN_TIMEOUT_NANOS);
        // queued frames are dropped only at release: a partly posted one is still pointed at by sends
        send.stopWriting();
        resources.disconnect();
    }

    /**
     * Every receive has come back, and every signaled send (an unsignaled one that already succeeded produces no
     * completion, but is retired by the signaled one after it or is done anyway).
     */
    private boolean isDrained(long now) {
        long drainDeadline = deadline;
        if (state == ChannelState.FLUSHED_AWAITING_EVENT) {
            if (now - deadline < 0) {
                return false; // the event may still come with its reason
            }
            drainDeadline = deadline - FLUSH_GRACE_NANOS + DRAIN_TIMEOUT_NANOS; // from the flushes, as DRAINING's
        }
        if (resources.queuePair() == null || (resources.receivesOutstanding() <= 0
                && send.signaledOutstanding() == 0 && sharedReceivesSettled())) {
            return true;
        }
        if (now - drainDeadline > 0) {
            outcome.drainTimedOut = true;
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
        if (state == ChannelState.PEER_DRAINING) {
            settlePeerDisconnect();
        }
        moveTo(ChannelState.CLOSED, NONE);
        resources.destroyQueuePair();
        release.run();
        LOG.debug("channel {} closed{}", id, outcome.cause == null ? "" : ": " + outcome.cause.getMessage());
    }

    /** After the drain: a peer's disconnect is an orderly close if its goodbye arrived, else a lost connection. */
    private void settlePeerDisconnect() {
        if (peerDisconnect == null || outcome.cause != null) {
            return;
        }
        outcome.cause = new FabricException(receive.remoteClosing()
                ? "channel " + id + ": peer " + describe(remote) + " closed the connection"
                : "channel " + id + ": connection to " + describe(remote) + " lost: " + peerDisconnect);
        peerDisconnect = null;
        if (ENDED.admit()) {
            LOG.info("{}", outcome.cause.getMessage());
        }
    }

    /**
     * How the channel ended, decided by the first teardown decision: its cause (null: a clean local close) is the
     * first one given, but for two states that settle it later: FLUSHED_AWAITING_EVENT's "work requests flushed" is
     * dropped when the DISCONNECTED event explains the flushes, and PEER_DRAINING's "closed" or "lost" is decided when
     * the drain ends. {@code silent}: the handler is not told (it never saw the channel, or the caller gets the
     * exception): an abort sets it as it tears down. {@code drainTimedOut}: the drain gave up (tests, the log).
     */
    private static final class Outcome {
        // written under the lock, before the move to the state that ends the teardown (CLOSED); volatile for the
        // readers that do not take the lock (monitoring, tests: closeCause, drainTimedOut)
        volatile FabricException cause;
        boolean silent;
        volatile boolean drainTimedOut;

        void decide(FabricException why) {
            if (cause == null) {
                cause = why;
            }
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
