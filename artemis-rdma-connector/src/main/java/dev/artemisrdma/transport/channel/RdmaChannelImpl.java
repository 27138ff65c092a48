package dev.artemisrdma.transport.channel;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.locks.ReentrantLock;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.api.SendBuffer;
import dev.artemisrdma.transport.api.SendMemoryException;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.Endpoints;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.fabric.SpinningLock;
import dev.artemisrdma.transport.flow.BufferPool;
import dev.artemisrdma.transport.flow.SharedReceivePool;
import dev.artemisrdma.transport.loop.LoopChannel;
import dev.artemisrdma.transport.stats.ChannelCounters;
import dev.artemisrdma.transport.stats.TransportStats;
import dev.artemisrdma.transport.wire.Handshake;

/**
 * One connection over one RC queue pair, as its users know it (the {@link RdmaChannel} the application writes to and
 * its handler is called with, the channel the transport sets up and closes): the wiring of the parts that do the
 * work, each with one job and one owner, and the calls that delegate to them. It holds no state of its own but the
 * channel's lock, which every part that changes the channel shares. Each part below that serves one kind of caller
 * is a {@link ChannelPart}, made from the core the constructor builds (the lock and the parts under them), and logs
 * in {@link ChannelLog} (this class's category).
 * <ul>
 *   <li>{@link WritePath}: the writers' calls (allocate, write, flush, autoRead); writers, under the lock;</li>
 *   <li>{@link LoopSide}: what the completion loop calls ({@link LoopChannel}: completions, batches, ticks, the
 *       requests of other threads); the loop thread;</li>
 *   <li>{@link QueuePairSetup}: the queue pair's set-up (bind, attach) and the asking of its outcome; the set-up
 *       thread, under the lock;</li>
 *   <li>{@link SetupOutcome}: the set-up's outcome carried out (the peer's handshake applied, the channel opened or
 *       torn down); the loop thread, under the lock;</li>
 *   <li>{@link HandlerCalls}: the calls into the application's handler; the loop thread, never under the lock;</li>
 *   <li>{@link PublishedMeasures}: what monitoring and tests read, never under the lock;</li>
 *   <li>below them: {@link ChannelLifecycle} (the state and every teardown decision), {@link ChannelResources}
 *       (the native objects and their order), {@link SendSide} (framing, credits, the send ring and the outbox),
 *       {@link ReceiveSide} (receive completions, reassembly, what each batch taught),
 *       {@link SharedReceiveMembership} (its place in the loop's shared receive pool), {@link ChannelCommands} (what
 *       other threads ask of the loop), {@link HandlerSlot} (the handler, made once).</li>
 * </ul>
 *
 * <p>Threads, one owner per part. The lifecycle, the resources, the send side and the membership are guarded by
 * {@link #lock}: writers, the thread setting the connection up (until its queue pair is attached), and the
 * completion loop take it (the fabric forbids concurrent posts on one queue pair, and the loop posts reposts and
 * credit frames too). rdma_cm's event thread, the transport's timer, closers and the set-up's outcome (connect
 * returned, or connect or accept failed) do not: they ask the loop ({@link ChannelCommands}), which carries their
 * requests out in {@link LoopSide#runCommands} (docs/design/channel-threads.md: who writes what, and what is left to
 * move). The receive side is the completion loop thread's alone, without the lock; what a batch taught is applied
 * under the lock once per batch, in {@link LoopSide#endOfBatch}. The connection's memory is released only on the loop
 * thread (or where no loop thread polls for the channel any more), so the receive side never reads memory that is
 * gone. Handler callbacks are made on the loop thread and never under the lock, so a handler may write, and a writer
 * holding its own locks cannot deadlock against a callback. Monitoring and tests never take the lock: they read what
 * the loop (or, for a failure, the writer) publishes where it changes ({@link PublishedMeasures}), so a scrape never
 * waits for the data path.
 *
 * <p>Memory. One registration per connection holds the receive slots ({@code slots * slotSize}) followed by the
 * send headers ({@link TransportConfig#SEND_HEADER_STRIDE} per send ring slot). It is released only after the queue
 * pair is destroyed, and every send buffer stays with the ring until its work request is known complete.
 *
 * <p>Shared receives. An accepted connection whose peer accepts credit growth may instead take its receives from its
 * completion loop's {@link SharedReceivePool}: it posts none, its registration holds only the send headers, it
 * offers the pool's guaranteed minimum as initial credits, and each batch the pool decides what the receives the
 * peer consumed give back (see there for why that still keeps every SEND on a posted receive).
 *
 * <p>Closing never blocks the caller longer than {@code closeTimeout} + {@link #CLOSE_GRACE_NANOS}: pending frames
 * are flushed for at most closeTimeout (a peer withholding credits cannot hold it longer), then the connection is
 * disconnected; draining and release finish on the loop thread.
 */
public final class RdmaChannelImpl implements RdmaChannel {

    /** What a closing caller waits beyond closeTimeout for the disconnect and release (done on the loop thread). */
    public static final long CLOSE_GRACE_NANOS = ChannelLifecycle.CLOSE_GRACE_NANOS;

    private final String id;
    private final InetSocketAddress remote;
    private final ReentrantLock lock = new SpinningLock(); // meets the loop on every write: see SpinningLock
    private final ChannelResources resources;
    private final ChannelLifecycle life;
    private final ChannelCommands commands;
    private final HandlerCalls calls;
    private final SetupOutcome outcome;
    private final LoopSide loop;
    private final QueuePairSetup setup;
    private final WritePath writes;
    private final PublishedMeasures measures;

    /**
     * A channel as {@code spec} says (see there); {@code handler}: the active side's, null where the spec's factory
     * makes it.
     *
     * @throws FabricException when the peer's handshake in {@code spec} breaks the credit window's bound (a protocol
     *                         error: the request is refused with it)
     */
    public RdmaChannelImpl(ChannelHost transport, TransportConfig config, String id, InetSocketAddress remote,
                           InetSocketAddress local, ChannelHandler handler, ChannelSpec spec) throws FabricException {
        this.id = id;
        this.remote = remote;
        HandlerSlot handlerSlot = new HandlerSlot(handler, spec.handlerFactory());
        int slots = config.postedReceives();
        SendSide send = new SendSide(config, id, remote, config.creditThresholdInForce());
        ReceiveSide receive = new ReceiveSide(config, id, remote, slots, transport.reassemblyBudget(), this::deliver);
        send.credits().offered(slots); // what localParams() offers
        SharedReceiveMembership shared = new SharedReceiveMembership(config, send.credits());
        this.resources = new ChannelResources(id);
        this.life = new ChannelLifecycle(id, remote, config, send, receive, shared, resources,
                () -> resources.release(send, receive, shared, loopChannel())); // made below: read at the release
        ChannelPart core = new ChannelPart(id, remote, config, lock, send, receive, shared, resources, life);
        this.calls = new HandlerCalls(core, this, transport, handlerSlot);
        this.outcome = new SetupOutcome(core, calls);
        this.loop = new LoopSide(core, outcome, calls);
        this.commands = loop.commands();
        this.setup = new QueuePairSetup(core, transport, local, spec.speaksTls(), loop);
        this.writes = new WritePath(core, loop);
        this.measures = new PublishedMeasures(core, outcome, loop);
        if (spec.peer() != null) {
            outcome.setPeer(spec.peer());
        }
        if (spec.sharesReceives()) {
            shared.share(spec.windowGrows()); // before bind: it sizes the loop slot and the registration
        }
        if (spec.pool() != null) {
            resources.usePool(spec.pool());
        }
    }

    /** The receive side's frames, to the handler (loop thread; the receive side is made before the handler's calls). */
    private void deliver(ByteBuffer frame) {
        calls.deliver(frame);
    }

    // --------------------------------------------------------------------- the transport's calls: set-up, end

    /** See {@link QueuePairSetup#localParams}. */
    public Handshake.Params localParams() {
        return setup.localParams();
    }

    /** The connection-manager side of this channel: builds its queue pair ({@link QueuePairSetup#setup}). */
    public ConnectionSetup setup() {
        return setup.setup();
    }

    /** rdma_cm's events for this channel's queue pair, handed to its loop ({@link QueuePairSetup#events}). */
    public QueuePairEvents events() {
        return setup.events();
    }

    /** See {@link QueuePairSetup#bindBeforeAccept}. */
    public void bindBeforeAccept(FabricDevice device) throws FabricException {
        setup.bindBeforeAccept(device);
    }

    /** See {@link QueuePairSetup#activeEstablished}. */
    public void activeEstablished(Handshake.Params peer) throws FabricException {
        setup.activeEstablished(peer);
    }

    /** See {@link QueuePairSetup#setupFailed}. */
    public void setupFailed(FabricException why, boolean notifyHandler) {
        setup.setupFailed(why, notifyHandler);
    }

    /** See {@link QueuePairSetup#failHandshake}. */
    public void failHandshake(FabricException why) {
        setup.failHandshake(why);
    }

    /**
     * The handshake deadline passed (timer thread): the channel's loop decides, in {@link LoopSide#runCommands}, after
     * an ESTABLISHED that came first, and calls {@link HandshakeDeadline#applyExpiry}.
     */
    void handshakeExpired(HandshakeDeadline deadline) {
        commands.handshakeExpired(deadline);
    }

    /** The handshake deadline's decision, on the loop (see {@link SetupOutcome#expireHandshake}). */
    boolean expireHandshake(Duration timeout) {
        return outcome.expireHandshake(timeout);
    }

    /** Whether this channel's memory comes from {@code pool} (so from that pool's device). */
    public boolean usesPool(BufferPool pool) {
        return resources.pool() == pool;
    }

    /**
     * Runs {@code gone} once the fabric let go of this closed channel's queue pair and rdma_cm id (whose destroy may
     * wait a minute for a DREQ the peer does not answer); at once when it never had one. For the transport, once the
     * channel is closed.
     */
    public void whenGone(Runnable gone) {
        QueuePair qp = resources.queuePair(); // without the lock: closed, nothing attaches a queue pair any more
        if (qp == null) {
            gone.run();
        } else {
            qp.whenGone(gone);
        }
    }

    /** The queue pair's number (-1 before one is attached). */
    public int qpNumber() {
        return resources.qpNumber();
    }

    /** Whether the channel takes its receives from its loop's shared pool (decided before it binds). */
    boolean sharesReceives() {
        return loop.sharesReceives();
    }

    // ------------------------------------------------------------------------------------------------ public API

    @Override
    public String id() {
        return id;
    }

    @Override
    public InetSocketAddress localAddress() {
        return setup.local();
    }

    @Override
    public InetSocketAddress remoteAddress() {
        return remote;
    }

    /**
     * {@inheritDoc}
     *
     * @throws IllegalArgumentException when {@code capacity} exceeds this side's maxFrameSize (no frame that large
     *                                  could ever be written)
     * @throws SendMemoryException      when no registered memory can be had (maxRegisteredMemory reached); the
     *                                  channel is unharmed
     */
    @Override
    public SendBuffer allocate(int capacity) {
        return writes.allocate(capacity);
    }

    @Override
    public void write(SendBuffer buffer, boolean flush) throws FabricException {
        writes.write(buffer, flush);
    }

    @Override
    public void write(ByteBuffer frame, boolean flush) throws FabricException {
        writes.write(frame, flush);
    }

    @Override
    public void flush() throws FabricException {
        writes.flush();
    }

    @Override
    public boolean isWritable() {
        return writes.isWritable();
    }

    @Override
    public void setAutoRead(boolean autoRead) {
        writes.setAutoRead(autoRead);
    }

    @Override
    public boolean isOpen() {
        return writes.isOpen();
    }

    /**
     * Orderly close, carried out by the channel's loop; returns within closeTimeout + {@link #CLOSE_GRACE_NANOS}
     * whatever the peer does.
     */
    @Override
    public void close() {
        commands.close();
        life.awaitClosed(life.closeWaitNanos());
    }

    /** Immediate close, carried out by the loop; returns within closeTimeout + {@link #CLOSE_GRACE_NANOS}. */
    @Override
    public void forceClose() {
        commands.forceClose();
        life.awaitClosed(life.closeWaitNanos());
    }

    // ------------------------------------------------------------- measures: never under the lock (any thread)

    @Override
    public TransportStats stats() {
        return measures.stats();
    }

    @Override
    public ChannelCounters counters() {
        return measures.counters();
    }

    @Override
    public long registeredBytes() {
        return measures.registeredBytes();
    }

    @Override
    public boolean olderPeer() {
        return measures.olderPeer();
    }

    @Override
    public SharedReceivePool sharedPool() {
        return measures.sharedPool();
    }

    // ----------------------------------------------------------------------------------- tests and diagnostics

    // what tests and diagnostics read, without the lock: see PublishedMeasures

    ChannelState state() {
        return measures.state();
    }

    boolean isClosed() {
        return measures.isClosed();
    }

    boolean commandsPending() {
        return measures.commandsPending();
    }

    FabricException closeCause() {
        return measures.closeCause();
    }

    int movesOffLoop() {
        return measures.movesOffLoop();
    }

    String path() {
        return measures.path();
    }

    boolean drainTimedOut() {
        return measures.drainTimedOut();
    }

    int receivesPostedOrAwaitingRepost() {
        return measures.receivesPostedOrAwaitingRepost();
    }

    String debugState() {
        return measures.debugState();
    }

    /** The channel as its completion loop knows it (its release gives it back to the loop; tests). */
    LoopChannel loopChannel() {
        return loop;
    }

    /** The channel's lock, for the tests that hold it to show a reader does not wait for it. */
    ReentrantLock lockForTests() {
        return lock;
    }

    @Override
    public String toString() {
        return "RdmaChannel[" + id + " " + Endpoints.describe(setup.local()) + " -> " + Endpoints.describe(remote) + " "
                + life.state() + "]";
    }
}
