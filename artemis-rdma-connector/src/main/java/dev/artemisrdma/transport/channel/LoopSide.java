package dev.artemisrdma.transport.channel;

import java.nio.ByteBuffer;

import dev.artemisrdma.transport.fabric.Endpoints;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.PartialPostException;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.fabric.WcStatus;
import dev.artemisrdma.transport.flow.SharedReceivePool;
import dev.artemisrdma.transport.loop.FlushRequest;
import dev.artemisrdma.transport.loop.LoopChannel;
import dev.artemisrdma.transport.stats.ChannelCounters;

/**
 * One job: what the channel's completion loop calls ({@link LoopChannel}; the loop knows the channel only as this):
 * completions, each batch applied ({@link #endOfBatch}: reposts, credits, retirements, what can go posted,
 * callbacks), the flushes writers left to it, the pool's recalls, ticks, the requests of other threads
 * ({@link #runCommands}) and the loop's own death ({@link #loopFailed}).
 *
 * <p>Owner: the completion loop thread ({@link #runCommands} also on the asking thread where no loop polls for the
 * channel, {@link #loopFailed} on a dying loop's). Its fields are the loop thread's (the {@link FlushRequest}'s mark
 * is the writers' and the loop's, see there); every change to the parts shared with writers and the set-up is under
 * the channel's lock; the receive side is the loop's, without the lock. Handler callbacks ({@link HandlerCalls}) are
 * made outside the lock.
 */
final class LoopSide extends ChannelPart implements LoopChannel {

    /**
     * Consumed slots are reposted in groups of this many: one ibv_post_recv per group instead of one per frame. Safe
     * for credits, which are returned only for receives actually reposted; at most repostBatch - 1 slots wait.
     */
    private final int repostBatch;
    private final SetupOutcome outcome;
    private final HandlerCalls calls;
    /** What other threads ask of the channel, carried out on its loop (see {@link #runCommands}). */
    private final ChannelCommands commands;
    /** Completions and errors, counted by the completion loop (see ChannelCounters). */
    private final ChannelCounters counters = new ChannelCounters();

    /** The channel's one request that the loop post what writers queued while it handled a batch (WritePath). */
    private final FlushRequest flushRequest = new FlushRequest(this);
    /** Set by the completion loop while this channel is in its current batch (loop thread only). */
    private boolean touched;
    /**
     * A lower bound on the credits the peer held when the current batch began (loop thread only): read under the
     * lock when a batch is applied, and only raised since by the writers returning credit, so a SEND count within
     * it needs no lock to be known legal. 0 before the first batch: the first shared receive reads it.
     */
    private int peerHeldAtBatchStart;

    LoopSide(ChannelPart core, SetupOutcome outcome, HandlerCalls calls) {
        super(core);
        this.repostBatch = config.repostBatch();
        this.outcome = outcome;
        this.calls = calls;
        this.commands = new ChannelCommands(this, resources); // its mailbox names this as the loop's channel
    }

    ChannelCommands commands() {
        return commands;
    }

    /** What a writer hands the loop when it leaves its flush to it ({@link WritePath}). */
    FlushRequest flushRequest() {
        return flushRequest;
    }

    @Override
    public String id() {
        return id;
    }

    @Override
    public ChannelCounters counters() {
        return counters;
    }

    @Override
    public boolean sharesReceives() {
        return shared.shares();
    }

    @Override
    public boolean sharedWindowGrows() {
        return shared.grows();
    }

    /** Called by the loop that admitted this channel to its pool (under our lock, from bind). */
    @Override
    public void useSharedPool(SharedReceivePool pool, SharedReceivePool.Allocation allocation) {
        shared.admitted(pool, allocation);
    }

    // ------------------------------------------------------------------------------ completions (loop thread)

    @Override
    public int qpNumber() {
        return resources.qpNumber();
    }

    @Override
    public boolean joinBatch() {
        if (touched) {
            return false;
        }
        touched = true;
        // rdma_cm said ESTABLISHED before these completions (a frame, or the flushes of the peer's disconnect): open
        // first, as that thread did when it made the handler itself, so a peer that connects and leaves at once is
        // still an accepted connection that closed
        commands.runPending();
        return true;
    }

    @Override
    public void leaveBatch() {
        touched = false;
    }

    @Override
    public void onReceiveCompletion(int slot, int status, int byteLength, long immediate) {
        openOnPeerFrame(status);
        // a drain the peer began still delivers what it sent first: successful completions precede the flushes
        ChannelState s = life.state();
        receive.onReceive(slot, status, byteLength, immediate, s.tearingDown(), s == ChannelState.PEER_DRAINING);
    }

    @Override
    public void onSharedReceiveCompletion(ByteBuffer poolView, int base, int status, int byteLength, long immediate) {
        openOnPeerFrame(status);
        ChannelState s = life.state();
        receive.onSharedReceive(poolView, base, status, byteLength, immediate, s.tearingDown(),
                s == ChannelState.PEER_DRAINING);
        if (receive.batchArrived() + receive.batchReleased() > peerHeldAtBatchStart) {
            checkOverdrawn();
        }
    }

    /** A frame from a peer still connecting opens the channel (see {@link SetupOutcome#openOnPeerFrame}). */
    private void openOnPeerFrame(int status) {
        if (!life.state().connecting() || status != WcStatus.SUCCESS) {
            return; // an open channel's completions leave here after one volatile read
        }
        outcome.openOnPeerFrame();
    }

    /**
     * The peer may have spent more credits than it held (loop thread, on the shared receive that would be one too
     * many): checked against what it holds now, under the lock. A peer that did takes receives promised to other
     * connections on the pool, so its queue pair goes to error at once, before the rest of the batch is handled:
     * every further SEND of it is refused by the device instead of taking another connection's receive.
     */
    private void checkOverdrawn() {
        lock.lock();
        try {
            int held = send.credits().unspentByPeer();
            peerHeldAtBatchStart = held; // the writers may have returned credit since the batch began
            int spent = receive.batchArrived() + receive.batchReleased();
            if (spent > held && receive.batchProtocolError() == null && !life.state().tearingDown()) {
                receive.protocolError(new FabricException("protocol error: the peer sent " + receive.batchArrived()
                        + " SENDs and gave back " + receive.batchReleased() + " credits holding " + held
                        + " (it would take receives of the shared pool promised to other connections)"));
                life.fail(receive.batchProtocolError());
            }
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void onSendCompletion(int slot, int status) {
        receive.onSend(slot, status);
    }

    /**
     * Applies one batch of completions: reposts, credits, retirements; posts what can go; fires callbacks. Returns
     * whether a deadline runs now (see {@link ChannelLifecycle#deadlineRunning}).
     */
    @Override
    public boolean endOfBatch() {
        boolean delivered = receive.batchDelivered();
        boolean notifyWritable;
        boolean notifyClosed;
        boolean deadline;
        lock.lock();
        try {
            resources.receivesCompleted(receive.batchReceived());
            if (receive.batchSendSlot() >= 0) {
                send.retireThrough(receive.batchSendSlot());
            }
            try {
                send.credits().grant(receive.batchGranted());
                send.credits().arrived(receive.batchArrived());
                if (receive.batchReleased() > 0) {
                    if (!shared.isMember()) {
                        throw new FabricException("protocol error: the peer gave back credits that were never "
                                + "recalled (this side grants from no shared pool)");
                    }
                    send.credits().peerReleased(receive.batchReleased());
                }
                if (receive.batchRecallKeep() > 0) {
                    send.recalled(receive.batchRecallKeep());
                }
            } catch (FabricException e) {
                receive.protocolError(e);
            }
            if (shared.isMember()) {
                FabricException overdrawn = shared.settleBatch(receive.batchSharedConsumed(),
                        receive.batchCreditWanted(),
                        receive.batchProtocolError() == null ? receive.batchReleased() : 0,
                        life.state().tearingDown());
                if (overdrawn != null) {
                    receive.protocolError(overdrawn);
                }
            }
            life.applyBatchOutcome(counters);
            peerHeldAtBatchStart = send.credits().unspentByPeer();
            repostLocked();
            life.progress();
            notifyWritable = send.takeWritableOwed(!life.state().tearingDown());
            notifyClosed = life.releasedUntold();
            deadline = life.deadlineRunning();
        } finally {
            lock.unlock();
            receive.resetBatch();
        }
        calls.callbacks(delivered, notifyWritable, notifyClosed);
        return deadline;
    }

    /**
     * The loop's shared pool needs receives back: asks the peer to give back what it holds beyond {@code keep} (it
     * does when it has nothing queued). Loop thread; only an open channel whose window grew beyond {@code keep}, and
     * only a peer that answers recalls, is asked. A channel the pool has judged to keep more than its fair share
     * fails here instead (see {@link SharedReceivePool}).
     */
    @Override
    public void recall(int keep) {
        lock.lock();
        try {
            if (life.state() != ChannelState.OPEN || !shared.holdsMoreThan(keep)) {
                return;
            }
            String evicted = shared.evicted();
            if (evicted != null) {
                life.fail(new FabricException("channel " + id + " (peer " + Endpoints.describe(remote) + "): "
                        + evicted));
                return;
            }
            boolean withdrew = shared.withdrawOwed(keep) > 0; // what the peer was never sent needs no asking
            if (shared.holdsMoreThan(keep) && send.queueRecall(keep) || withdrew) {
                life.flush(false); // the recall, or a credit frame the smaller threshold may have made due
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * Reposts consumed slots once a group is complete. CONNECTING counts too: the passive side hears "established"
     * after the peer may already have sent, and a slot not reposted would be a credit lost for good.
     */
    private void repostLocked() {
        RecvList repost = receive.repost();
        if (life.state().tearingDown()) {
            repost.clear(); // tearing down: consumed slots stay unposted
        } else if (repost.size() >= repostBatch) {
            try {
                resources.queuePair().postRecv(repost);
                resources.receivesPosted(repost.size());
                send.credits().reposted(repost.size());
            } catch (FabricException e) {
                int posted = PartialPostException.postedOf(e, repost.size());
                resources.receivesPosted(posted); // those complete (flushed) and are waited for; the rest never will
                life.fail(new FabricException("channel " + id + " (" + Endpoints.describe(remote)
                        + "): reposting receives failed after " + posted + " of " + repost.size() + ": "
                        + e.getMessage(), e));
            }
            repost.clear();
        }
        resources.awaitingRepost(repost.size()); // published for the readers without the lock
    }

    /**
     * Periodic work of the loop: deadlines (close, reassembly), writability owed from other threads, release. Returns
     * whether the channel has a deadline running or work pending (not open, frames queued, a frame half reassembled):
     * a loop whose channels have none may look less often.
     */
    @Override
    public boolean tick(long now) {
        boolean notifyWritable;
        boolean notifyClosed;
        boolean pending;
        lock.lock();
        try {
            life.tick(now);
            notifyWritable = send.takeWritableOwed(!life.state().tearingDown());
            notifyClosed = life.releasedUntold();
            pending = life.deadlineRunning();
        } finally {
            lock.unlock();
        }
        calls.callbacks(false, notifyWritable, notifyClosed);
        return pending || notifyWritable;
    }

    /**
     * The completion loop posts what writers left to it (see {@link WritePath#write}); returns whether the channel
     * has a deadline running. Loop thread.
     */
    @Override
    public boolean flushLeftToLoop() {
        boolean notifyWritable;
        boolean notifyClosed;
        boolean deadline;
        lock.lock();
        try {
            life.flush(true); // as the writers would have: a stream's flush may wait behind a signaled SEND
            notifyWritable = send.takeWritableOwed(!life.state().tearingDown());
            notifyClosed = life.releasedUntold();
            deadline = life.deadlineRunning();
        } finally {
            lock.unlock();
        }
        calls.callbacks(false, notifyWritable, notifyClosed);
        return deadline;
    }

    /**
     * Carries out what other threads asked ({@link ChannelCommands}): the establishment first (rdma_cm's ESTABLISHED,
     * then connect's return, CONNECTED), with the handshake deadline after it (whichever of the two reached the
     * channel, an open channel outlives its deadline), then a failed set-up (SETUP_FAILED), then rdma_cm's
     * DISCONNECTED (it reports ESTABLISHED before it; the peer's disconnect is the better cause), then a writer's
     * failure, then the local requests, close before forceClose. On the loop thread; on the asking thread only where
     * no loop polls for the channel. Returns whether a deadline runs.
     */
    @Override
    public boolean runCommands(int requests) {
        if ((requests & ChannelCommands.ESTABLISHED) != 0) {
            outcome.onEstablished();
        }
        if ((requests & ChannelCommands.CONNECTED) != 0) {
            outcome.applyConnected(commands.connected());
        }
        if ((requests & ChannelCommands.HANDSHAKE_EXPIRED) != 0) {
            commands.expiry().applyExpiry();
        }
        if ((requests & ChannelCommands.SETUP_FAILED) != 0) {
            outcome.applySetupFailure(commands.setupFailure());
        }
        lock.lock();
        try {
            if ((requests & ChannelCommands.DISCONNECTED) != 0) {
                life.peerDisconnected(commands.disconnectReason());
            }
            if ((requests & ChannelCommands.WRITER_FAILED) != 0) {
                life.applyWriterFailure();
            }
            if ((requests & ChannelCommands.CLOSE) != 0) {
                life.requestClose();
            }
            if ((requests & ChannelCommands.FORCE_CLOSE) != 0) {
                life.requestForceClose();
            }
            return life.deadlineRunning();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Our completion loop died: nobody will poll this queue pair's completions, so there is nothing to drain. The
     * queue pair goes to error and is destroyed at once, then the handler hears the cause; all on the dying loop's
     * thread, which polls nothing any more, so the memory is released here (nobody else would). One not attached
     * yet is refused by {@link QueuePairSetup}'s attach instead.
     */
    @Override
    public void loopFailed(FabricException why) {
        boolean releasedHere;
        lock.lock();
        try {
            if (!life.loopFailed(why)) {
                return;
            }
            releasedHere = life.abort(why, true, true);
        } finally {
            lock.unlock();
        }
        if (releasedHere) {
            calls.notifyClosed();
        }
    }
}
