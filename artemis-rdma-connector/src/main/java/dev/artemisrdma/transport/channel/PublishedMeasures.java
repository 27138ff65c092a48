package dev.artemisrdma.transport.channel;

import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.flow.SharedReceivePool;
import dev.artemisrdma.transport.stats.ChannelCounters;
import dev.artemisrdma.transport.stats.ChannelMeasures;
import dev.artemisrdma.transport.stats.PublishedCounters;
import dev.artemisrdma.transport.stats.TransportStats;

/**
 * One job: what monitoring ({@code ChannelGroupStats}, and through it the meters and JMX), diagnostics and tests read
 * of one channel. Nothing here takes the channel's lock, so a reader never waits for a writer or the loop: each value
 * is published where it changes, by the thread that changes it (docs/design/channel-threads.md, 2d): volatile fields
 * and counters, or release stores read with acquire loads. The lifecycle's facts are written before the state they
 * lead to, so a reader that saw a state sees them as that state left them.
 *
 * <p>Owner: none; any thread reads. It holds no state of its own, only the parts it reads.
 */
final class PublishedMeasures extends ChannelPart implements ChannelMeasures {

    private final SetupOutcome outcome;
    private final LoopSide loop;

    PublishedMeasures(ChannelPart core, SetupOutcome outcome, LoopSide loop) {
        super(core);
        this.outcome = outcome;
        this.loop = loop;
    }

    @Override
    public TransportStats stats() {
        PublishedCounters c = send.counts;
        return new TransportStats(c.get(SendSide.FRAMES_SENT), c.get(SendSide.BYTES_SENT), receive.framesReceived(),
                receive.bytesReceived(), c.get(SendSide.CREDIT_FRAMES_SENT), receive.creditFramesReceived(),
                c.get(SendSide.CREDIT_STALLS), c.get(SendSide.SEND_QUEUE_STALLS), c.get(SendSide.SENDS_POSTED),
                c.get(SendSide.SIGNALED_SENDS), c.get(SendSide.INLINE_SENDS), c.get(SendSide.POST_CALLS),
                c.get(SendSide.FRAMES_PACKED), c.get(SendSide.PACKED_SENDS), c.get(SendSide.FLUSHES_TO_LOOP),
                c.get(SendSide.IMMEDIATE_SENDS));
    }

    /** Counted by the completion loop ({@link LoopSide}). */
    @Override
    public ChannelCounters counters() {
        return loop.counters();
    }

    @Override
    public long registeredBytes() {
        return resources.registeredBytes();
    }

    @Override
    public boolean olderPeer() {
        return outcome.olderPeer();
    }

    /** The pool this channel takes its receives from while it holds credits there; null otherwise. */
    @Override
    public SharedReceivePool sharedPool() {
        return shared.pool();
    }

    ChannelState state() {
        return life.state();
    }

    boolean isClosed() {
        return life.state() == ChannelState.CLOSED;
    }

    /** Whether requests of other threads wait for the loop (tests). */
    boolean commandsPending() {
        return loop.commands().pending();
    }

    /**
     * Why the channel is closing or closed, null for a clean local close (for tests: a channel that was never
     * established has no handler to tell).
     */
    FabricException closeCause() {
        return life.cause();
    }

    /** State moves made off the channel's loop thread while it had one (for tests: see ChannelLifecycle). */
    int movesOffLoop() {
        return life.movesOffLoop();
    }

    /**
     * The states the channel went through, in order (for tests: see {@link ChannelState#path}); complete up to the
     * state a caller last read ({@link #state}, {@link #isClosed}).
     */
    String path() {
        return life.path();
    }

    /** Whether teardown gave up waiting for work requests (for tests: after a partial post it must not). */
    boolean drainTimedOut() {
        return life.drainTimedOut();
    }

    /**
     * Receive slots posted right now plus those waiting for their group's repost; with no traffic in flight that is
     * every slot: none may leak. As the loop's last batch left them (published at its end, see
     * {@link ChannelResources#receivesPostedOrAwaitingRepost}): during a batch, the count before it.
     */
    int receivesPostedOrAwaitingRepost() {
        return resources.receivesPostedOrAwaitingRepost();
    }

    /**
     * Internal state for diagnostics: credits, queue and ring occupancy. The state, the path and the lifecycle's
     * facts are published where they change (the facts before the state they lead to); the send side's numbers are
     * each a recent value, not one instant's.
     */
    String debugState() {
        return id + " " + life.state() + " " + send.debugState() + " receives=" + resources.receivesOutstanding()
                + " " + shared + " movesOffLoop=" + life.movesOffLoop() + " path=" + life.path();
    }
}
