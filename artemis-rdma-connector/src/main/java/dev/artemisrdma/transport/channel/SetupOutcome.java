package dev.artemisrdma.transport.channel;

import java.time.Duration;
import org.slf4j.Logger;

import dev.artemisrdma.transport.fabric.Endpoints;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.wire.Handshake;

/**
 * One job: what becomes of a connection's set-up. It applies the peer's handshake and opens the channel (rdma_cm's
 * ESTABLISHED, connect's return with the peer's accept, or the peer's first frame), or tears it down (the connect
 * or accept failed, the accept reply was refused, the handshake deadline passed). The set-up threads only ask
 * ({@link QueuePairSetup}, {@link ChannelCommands}); the loop carries their requests out here
 * ({@link LoopSide#runCommands}).
 *
 * <p>Owner: the channel's completion loop thread (or the asking thread, where no loop polls for the channel), under
 * the channel's lock for every change; the handler is made and told outside it ({@link HandlerCalls}). One call comes
 * from the creating thread: the passive side's {@link #setPeer}, in the constructor, before any other thread can see
 * the channel. {@link #olderPeer} is read by monitoring without the lock.
 */
final class SetupOutcome extends ChannelPart {

    private static final Logger LOG = ChannelLog.LOG;

    private final HandlerCalls calls;
    /** The peer stated fewer features than this build knows (see {@link #olderPeer}). */
    private volatile boolean olderPeer;

    SetupOutcome(ChannelPart core, HandlerCalls calls) {
        super(core);
        this.calls = calls;
    }

    /** Whether the peer stated fewer features than this build knows (monitoring: a volatile read, no lock). */
    boolean olderPeer() {
        return olderPeer;
    }

    /**
     * The peer's handshake: how we must fragment for it and what it grants. From the constructor (passive side) or
     * from CONNECTED (active side, on the loop).
     *
     * @throws FabricException when its values break the credit window's bound (a protocol error)
     */
    void setPeer(Handshake.Params peer) throws FabricException {
        lock.lock();
        try {
            send.peer(peer);
            olderPeer = !peer.statesEveryKnownFeature();
            if (!peer.readsPacked() && ChannelLog.NOT_PACKED.admit()) {
                LOG.info("channel {} ({}): the peer does not read packed SENDs (an older artemis-rdma): small frames"
                        + " go one per SEND", id, Endpoints.describe(remote));
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * CONNECTED, on the loop (or where no loop runs it): the peer's handshake, then open; the caller told. What else
     * goes wrong is its failure too (a caller told nothing would take a channel that never opened).
     */
    void applyConnected(ChannelCommands.Connected connected) {
        FabricException refused = null;
        boolean applied = false;
        try {
            setPeer(connected.peer());
            onEstablished();
            applied = true;
        } catch (FabricException e) {
            refused = e;
        } catch (RuntimeException e) {
            refused = new FabricException("channel " + id + " (" + Endpoints.describe(remote)
                    + "): opening it failed: " + e, e);
        } finally {
            connected.answer(applied || refused != null ? refused : new FabricException("channel " + id + " ("
                    + Endpoints.describe(remote) + "): opening it failed on its completion loop (see the loop's log)"));
        }
    }

    /** Established: the handler made if it is still to be made (outside the lock), then the channel opens. */
    void onEstablished() {
        FabricException refused = calls.ready();
        lock.lock();
        try {
            openLocked(refused);
        } finally {
            lock.unlock();
        }
    }

    /** Opens the channel (under the lock); one whose handler the application refused fails at once. */
    private void openLocked(FabricException refused) {
        life.established();
        if (refused != null) {
            life.fail(refused);
        }
    }

    /**
     * A frame from the peer proves the connection is up, whatever rdma_cm has told us yet. The passive side hears
     * ESTABLISHED only when the peer's RTU has been processed, while the peer sends as soon as its connect returns,
     * so its first frame can complete here first (InfiniBand reports this as IBV_EVENT_COMM_EST). rdma_accept has
     * already moved our queue pair to RTS, and the peer's is ready, since it sent: the queue pair is told
     * ({@link QueuePair#establishedByPeer}), and the channel opens, so what the handler answers to that first frame
     * leaves at once instead of waiting for the event thread; the event, when it comes, finds the channel open and
     * does nothing. The active side learns the peer's handshake only when its connect returns, so it stays CONNECTING
     * until then. Loop thread, for a successful completion of a channel still connecting
     * ({@link LoopSide#onReceiveCompletion} looks first, with one volatile read).
     */
    void openOnPeerFrame() {
        FabricException refused = calls.ready();
        lock.lock();
        try {
            if (!life.mayOpenOnPeerFrame()) {
                return;
            }
            LOG.debug("channel {}: the peer's first frame arrived before rdma_cm's ESTABLISHED event; open now", id);
            resources.queuePair().establishedByPeer();
            openLocked(refused);
        } finally {
            lock.unlock();
        }
    }

    /**
     * The handshake deadline's decision, on the loop (see {@link ChannelLifecycle#expireHandshake}). Returns whether
     * the channel was established first (its place goes back now); false when the deadline tore it down, or when it
     * was already failing without having opened (its close gives the place back once its queue pair is gone).
     */
    boolean expireHandshake(Duration timeout) {
        FabricException why;
        boolean releasedHere;
        lock.lock();
        try {
            why = life.expireHandshake(timeout);
            if (why == null) {
                return life.everEstablished();
            }
            releasedHere = life.abort(why, true, false);
        } finally {
            lock.unlock();
        }
        if (ChannelLog.HANDSHAKE_EXPIRED.admit()) {
            LOG.warn("{}", why.getMessage());
        }
        if (releasedHere) {
            calls.notifyClosed();
        }
        return false;
    }

    /**
     * SETUP_FAILED, on the loop (or where no loop runs it): a queue pair the fabric was creating is gone, or ours to
     * abort; an established one whose accept reply was refused drains first.
     */
    void applySetupFailure(ChannelCommands.SetupFailure failure) {
        if (failure.connected()) {
            lock.lock();
            try {
                life.failHandshake(failure.cause());
            } finally {
                lock.unlock();
            }
            return;
        }
        boolean releasedHere;
        lock.lock();
        try {
            resources.setupEnded(life.state() == ChannelState.CLOSED);
            releasedHere = life.abort(failure.cause(), failure.tellHandler(), false);
        } finally {
            lock.unlock();
        }
        if (releasedHere) {
            calls.notifyClosed();
        }
    }
}
