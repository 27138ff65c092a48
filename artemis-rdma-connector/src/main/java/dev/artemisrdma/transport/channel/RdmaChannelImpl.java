package dev.artemisrdma.transport.channel;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.FrameTooLargeException;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.api.SendBuffer;
import dev.artemisrdma.transport.api.SendMemoryException;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.CompletionQueue;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.Endpoints;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.LogLimiter;
import dev.artemisrdma.transport.fabric.PartialPostException;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairCaps;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.fabric.QueuePairSpec;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.fabric.SpinningLock;
import dev.artemisrdma.transport.fabric.WcStatus;
import dev.artemisrdma.transport.flow.BufferPool;
import dev.artemisrdma.transport.flow.CreditWindow;
import dev.artemisrdma.transport.flow.PooledBuffer;
import dev.artemisrdma.transport.flow.SharedReceivePool;
import dev.artemisrdma.transport.loop.CompletionLoop;
import dev.artemisrdma.transport.loop.LoopChannel;
import dev.artemisrdma.transport.stats.ChannelCounters;
import dev.artemisrdma.transport.stats.TransportStats;
import dev.artemisrdma.transport.wire.Handshake;

/**
 * One connection over one RC queue pair: the public {@link RdmaChannel} API, and the wiring of the parts that do the
 * work, each with one job:
 * <ul>
 *   <li>{@link ChannelLifecycle}: the state and every teardown decision (see there);</li>
 *   <li>{@link ChannelResources}: the native objects the channel owns (loop slot, registration, queue pair) and the
 *       order they are created and destroyed in;</li>
 *   <li>{@link SendSide}: framing, credits, the send ring and the outbox;</li>
 *   <li>{@link ReceiveSide}: receive completions, reassembly and what each batch taught;</li>
 *   <li>{@link SharedReceiveMembership}: its place in the loop's shared receive pool, when it takes receives there.</li>
 * </ul>
 *
 * <p>Threads, one owner per part. The lifecycle, the resources, the send side and the membership are guarded by
 * {@link #lock}: writers, the thread setting the connection up (until its queue pair is attached), and the
 * completion loop take it (the fabric forbids concurrent posts on one queue pair, and the loop posts reposts and
 * credit frames too). rdma_cm's event thread, the transport's timer, closers and the set-up's outcome (connect
 * returned, or connect or accept failed) do not: they ask the loop ({@link ChannelCommands}), which carries their
 * requests out in {@link #runCommands} (docs/design/channel-threads.md: who writes what, and what is left to move).
 * The receive side is the completion loop thread's alone, without the lock; what a batch taught is applied under the
 * lock once per batch, in {@link #endOfBatch}. The connection's memory is released only on the loop thread (or where no loop
 * thread polls for the channel any more), so the receive side never reads memory that is gone. Handler callbacks are
 * made on the loop thread and never under the lock, so a handler may write, and a writer holding its own locks cannot
 * deadlock against a callback. Monitoring and tests never take the lock: they read what the loop (or, for a failure,
 * the writer) publishes where it changes (see {@link #debugState}), so a scrape never waits for the data path.
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
public final class RdmaChannelImpl implements RdmaChannel, LoopChannel {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaChannelImpl.class);
    // what a peer can make us log at will: LogLimiter.LINES lines per site and interval, then a summary
    private static final LogLimiter NOT_PACKED = LogLimiter.site(LOG, Level.INFO,
            "connections whose peer does not read packed SENDs");
    private static final LogLimiter HANDSHAKE_EXPIRED = LogLimiter.site(LOG, Level.WARN,
            "handshakes that passed their deadline");
    private static final LogLimiter HANDLER_FAILED = LogLimiter.site(LOG, Level.ERROR,
            "frames the handler failed on");
    // the application's other callbacks may fail on what a peer sent (onEndOfBatch after its frames), or on every
    // connection a peer opens and closes (onClosed): as often as the peer likes (issue 37, hole 7)
    private static final LogLimiter CALLBACK_FAILED = LogLimiter.site(LOG, Level.ERROR,
            "handler callbacks (end of batch, writable) that failed");
    private static final LogLimiter ON_CLOSED_FAILED = LogLimiter.site(LOG, Level.ERROR,
            "onClosed callbacks that failed");
    /** What a closing caller waits beyond closeTimeout for the disconnect and release (done on the loop thread). */
    public static final long CLOSE_GRACE_NANOS = ChannelLifecycle.CLOSE_GRACE_NANOS;

    private final ChannelHost transport;
    private final TransportConfig config;
    private final String id;
    private final InetSocketAddress remote;
    private final int slots;
    private final int slotSize;
    /**
     * Consumed slots are reposted in groups of this many: one ibv_post_recv per group instead of one per frame. Safe
     * for credits, which are returned only for receives actually reposted; at most repostBatch - 1 slots wait.
     */
    private final int repostBatch;
    private final ReentrantLock lock = new SpinningLock(); // meets the loop on every write: see SpinningLock
    private final SendSide send;
    private final ReceiveSide receive;
    private final SharedReceiveMembership shared;
    private final ChannelResources resources;
    private final ChannelLifecycle life;
    /** What other threads ask of the channel, carried out on its loop (see {@link #runCommands}). */
    private final ChannelCommands commands;

    private final HandlerSlot handler;
    /** The peer stated fewer features than this build knows (see {@link #olderPeer}). */
    private volatile boolean olderPeer;
    private volatile InetSocketAddress local;
    /** A writer left this channel's flush to the loop, which has not done it yet (under {@link #lock}). */
    private boolean flushLeftToLoop;

    /** This side states TLS in its handshake (its {@link ChannelSpec}). */
    private final boolean speaksTls;

    /** Set by the completion loop while this channel is in its current batch (loop thread only). */
    private boolean touched;
    /**
     * A lower bound on the credits the peer held when the current batch began (loop thread only): read under the
     * lock when a batch is applied, and only raised since by the writers returning credit, so a SEND count within
     * it needs no lock to be known legal. 0 before the first batch: the first shared receive reads it.
     */
    private int peerHeldAtBatchStart;
    /** Completions and errors, counted by the completion loop (see ChannelCounters). */
    final ChannelCounters counters = new ChannelCounters();

    @Override
    public ChannelCounters counters() {
        return counters;
    }

    /**
     * A channel as {@code spec} says (see there); {@code handler}: the active side's, null where the spec's factory
     * makes it.
     *
     * @throws FabricException when the peer's handshake in {@code spec} breaks the credit window's bound (a protocol
     *                         error: the request is refused with it)
     */
    public RdmaChannelImpl(ChannelHost transport, TransportConfig config, String id, InetSocketAddress remote,
                           InetSocketAddress local, ChannelHandler handler, ChannelSpec spec) throws FabricException {
        this.transport = transport;
        this.config = config;
        this.id = id;
        this.remote = remote;
        this.local = local;
        this.handler = new HandlerSlot(handler, spec.handlerFactory());
        this.speaksTls = spec.speaksTls();
        this.slots = config.postedReceives();
        this.slotSize = config.slotSize();
        this.repostBatch = config.repostBatch();
        this.send = new SendSide(config, id, remote, config.creditThresholdInForce());
        this.receive = new ReceiveSide(config, id, remote, slots, transport.reassemblyBudget(), this::deliver);
        send.credits().offered(slots); // what localParams() offers
        this.shared = new SharedReceiveMembership(config, send.credits());
        this.resources = new ChannelResources(id);
        this.life = new ChannelLifecycle(id, remote, config, send, receive, shared, resources,
                () -> resources.release(send, receive, shared, this));
        this.commands = new ChannelCommands(this, resources);
        if (spec.peer() != null) {
            setPeer(spec.peer());
        }
        if (spec.sharesReceives()) {
            shared.share(spec.windowGrows()); // before bind: it sizes the loop slot and the registration
        }
        if (spec.pool() != null) {
            resources.usePool(spec.pool());
        }
    }

    /**
     * What this side offers the peer in the handshake. Every side states credit growth (it takes grants up to the
     * maximum its peer states); only one on a shared pool offers a window that grows (minimum up to receiveSlots + 1).
     */
    public Handshake.Params localParams() {
        int features = Handshake.KNOWN_FEATURES | (speaksTls ? Handshake.FEATURE_TLS : 0); // all this build reads
        if (shared.shares()) {
            return new Handshake.Params(slotSize, TransportConfig.SHARED_MIN_CREDITS, config.maxFrameSize(), features,
                    shared.maxCredits());
        }
        return new Handshake.Params(slotSize, slots, config.maxFrameSize(), features, slots);
    }

    @Override
    public boolean sharesReceives() {
        return shared.shares();
    }

    @Override
    public boolean sharedWindowGrows() {
        return shared.grows();
    }

    /**
     * The pool this channel takes its receives from while it holds credits there; null otherwise. Monitoring's
     * reader: without the lock (admission and release publish it).
     */
    @Override
    public SharedReceivePool sharedPool() {
        return shared.pool();
    }

    /** Called by the loop that admitted this channel to its pool (under our lock, from bind). */
    @Override
    public void useSharedPool(SharedReceivePool pool, SharedReceivePool.Allocation allocation) {
        shared.admitted(pool, allocation);
    }

    /**
     * Completion queue entries this connection can ever have outstanding: all receives plus the send budget; on a
     * shared pool the send budget alone (the loop reserves the pool's receives once).
     */
    int completionEntries() {
        return config.completionEntriesPerConnection(shared.shares());
    }

    /** See {@link HandlerSlot#makeIfNeeded}; before the channel opens. */
    private FabricException handlerReady() {
        return handler.makeIfNeeded(this, remote, () -> life.state().connecting());
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

    /**
     * The peer's handshake: how we must fragment for it and what it grants. From the constructor (passive side) or
     * from CONNECTED (active side, on the loop).
     *
     * @throws FabricException when its values break the credit window's bound (a protocol error)
     */
    private void setPeer(Handshake.Params peer) throws FabricException {
        lock.lock();
        try {
            send.peer(peer);
            olderPeer = !peer.statesEveryKnownFeature();
            if (!peer.readsPacked() && NOT_PACKED.admit()) {
                LOG.info("channel {} ({}): the peer does not read packed SENDs (an older artemis-rdma): small frames"
                        + " go one per SEND", id, describe(remote));
            }
        } finally {
            lock.unlock();
        }
    }

    /** The connection-manager side of this channel: builds its queue pair and follows its events. */
    public ConnectionSetup setup() {
        return new ConnectionSetup() {
            @Override
            public QueuePairSpec queuePairSpec(FabricDevice device) throws FabricException {
                lock.lock();
                try {
                    bind(device, false);
                    resources.queuePairPending();
                    CompletionQueue queue = resources.loop().completionQueue();
                    if (shared.shares()) {
                        return new QueuePairSpec(queue, config.sendQueueDepth(), 1, 2, 1, config.inlineWanted(),
                                shared.queue());
                    }
                    return new QueuePairSpec(queue, config.sendQueueDepth(), slots, 2, 1, config.inlineWanted());
                } finally {
                    lock.unlock();
                }
            }

            @Override
            public void prepare(QueuePair queuePair) throws FabricException {
                attach(queuePair);
            }
        };
    }

    /**
     * rdma_cm's events for this channel's queue pair (the connection manager's thread, or the device's event thread):
     * each is handed to the channel's loop, which carries it out ({@link #runCommands}). The passive side's handler
     * is made there too: the application's {@code onAccepted} (for Artemis a {@code Connection}, with its plugins)
     * may take as long as it likes on the loop; on this thread it would hold every connection event of the fabric
     * (issue 37, hole 6).
     */
    public QueuePairEvents events() {
        return new QueuePairEvents() {
            @Override
            public void established(QueuePair queuePair) {
                commands.established();
            }

            @Override
            public void disconnected(QueuePair queuePair, String reason) {
                commands.disconnected(reason);
            }
        };
    }

    /** Whether this channel's memory comes from {@code pool} (so from that pool's device). */
    public boolean usesPool(BufferPool pool) {
        return resources.pool() == pool;
    }

    /**
     * Binds an accepted connection to its loop and memory on {@code device} before the accept, so that a refusal (every
     * loop full, memory refused) can still reject the request with its reason: once an accept has begun, librdmacm's
     * own reject carries none, and the client would read "nobody listens on that port".
     */
    public void bindBeforeAccept(FabricDevice device) throws FabricException {
        lock.lock();
        try {
            bind(device, true);
        } finally {
            lock.unlock();
        }
    }

    /** Takes a completion loop slot and registers this connection's memory on the device the route chose. */
    private void bind(FabricDevice device, boolean early) throws FabricException {
        boolean wasBound = resources.loop() != null;
        resources.bind(transport, this, device, completionEntries(),
                config.registeredBytesPerConnection(shared.shares()), shared, early);
        if (!wasBound && !shared.shares()) {
            receive.attach(resources.memory(), resources.index());
        }
    }

    /**
     * The queue pair exists: size the send side by what it really got, and post every receive. From this call on the
     * queue pair is this channel's, whatever follows: the fabric hands it over and never destroys it, the channel does
     * (on a failure here, through {@link #setupFailed}, which the transport calls). Only a CONNECTING channel
     * takes one: a channel released meanwhile (its handshake deadline passed, or its loop died, while the accept was
     * under way) has no memory to post receives into and no loop to poll them, so the queue pair is destroyed here.
     */
    private void attach(QueuePair queuePair) throws FabricException {
        lock.lock();
        try {
            FabricException refused = life.refusesQueuePair();
            if (refused != null) {
                resources.refuse(queuePair);
                throw refused;
            }
            resources.attach(queuePair);
            local = queuePair.localAddress();
            QueuePairCaps caps = queuePair.caps();
            if (caps.maxSendSge() < 2) {
                throw new FabricException("channel " + id + ": queue pair offers " + caps.maxSendSge()
                        + " send scatter-gather entries, the transport needs 2");
            }
            if (shared.shares()) {
                send.attach(queuePair, caps, resources.memory(), 0, resources.index(), resources.pool());
                // before the peer can send: its SENDs complete on the pool
                resources.loop().mapQueuePair(resources.qpNumber(), this);
                return;
            }
            if (caps.maxRecvWr() < slots) {
                throw new FabricException("channel " + id + ": queue pair takes " + caps.maxRecvWr()
                        + " receives, the transport posts " + slots);
            }
            send.attach(queuePair, caps, resources.memory(), config.receiveRegionBytes(), resources.index(),
                    resources.pool());
            RecvList initial = new RecvList(slots);
            for (int s = 0; s < slots; s++) {
                receive.addReceive(initial, s);
            }
            try {
                queuePair.postRecv(initial);
                resources.receivesPosted(slots);
            } catch (FabricException e) {
                resources.receivesPosted(posted(e, initial.size()));
                throw e;
            }
        } finally {
            lock.unlock();
        }
    }

    /** How many of {@code attempted} work requests a failed post did post (ibv_post_* stops at the bad one). */
    private static int posted(FabricException e, int attempted) {
        return e instanceof PartialPostException p ? Math.max(0, Math.min(p.posted(), attempted)) : 0;
    }

    /**
     * Active side: connect returned with the peer's accept. The channel's loop applies the peer's handshake and opens
     * the channel (CONNECTED, {@link #runCommands}); this caller waits for its verdict, at most connectTimeout, and
     * throws what applying the handshake threw (a protocol error in it), as when it applied it itself.
     */
    public void activeEstablished(Handshake.Params peer) throws FabricException {
        commands.connected(peer).await(config.connectTimeout().toNanos(), () -> new FabricException("channel " + id
                + " (" + describe(remote) + "): its completion loop did not open it within connectTimeout ("
                + config.connectTimeout().toMillis() + " ms): a handler holds the loop"));
    }

    /**
     * CONNECTED, on the loop (or where no loop runs it): the peer's handshake, then open; the caller told. What else
     * goes wrong is its failure too (a caller told nothing would take a channel that never opened).
     */
    private void applyConnected(ChannelCommands.Connected connected) {
        FabricException refused = null;
        boolean applied = false;
        try {
            setPeer(connected.peer());
            onEstablished();
            applied = true;
        } catch (FabricException e) {
            refused = e;
        } catch (RuntimeException e) {
            refused = new FabricException("channel " + id + " (" + describe(remote) + "): opening it failed: " + e, e);
        } finally {
            connected.answer(applied || refused != null ? refused : new FabricException("channel " + id + " ("
                    + describe(remote) + "): opening it failed on its completion loop (see the loop's log)"));
        }
    }

    /** Established: the handler made if it is still to be made (outside the lock), then the channel opens. */
    private void onEstablished() {
        FabricException refused = handlerReady();
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
     * until then.
     */
    private void openOnPeerFrame(int status) {
        if (!life.state().connecting() || status != WcStatus.SUCCESS) {
            return; // an open channel's completions leave here after one volatile read
        }
        FabricException refused = handlerReady();
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
     * The handshake deadline passed (timer thread): the channel's loop decides, in {@link #runCommands}, after an
     * ESTABLISHED that came first, and calls {@link HandshakeDeadline#applyExpiry}.
     */
    void handshakeExpired(HandshakeDeadline deadline) {
        commands.handshakeExpired(deadline);
    }

    /**
     * The handshake deadline's decision, on the loop (see {@link ChannelLifecycle#expireHandshake}). Returns whether
     * the deadline tore the channel down.
     */
    boolean expireHandshake(java.time.Duration timeout) {
        FabricException why;
        boolean releasedHere;
        lock.lock();
        try {
            why = life.expireHandshake(timeout);
            if (why == null) {
                return false;
            }
            releasedHere = life.abort(why, true, false);
        } finally {
            lock.unlock();
        }
        if (HANDSHAKE_EXPIRED.admit()) {
            LOG.warn("{}", why.getMessage());
        }
        if (releasedHere) {
            notifyClosed();
        }
        return true;
    }

    /**
     * Connect or accept failed before the channel was established: the channel's loop releases what bind and attach
     * took (SETUP_FAILED, {@link #runCommands}): the queue pair at once, the memory where no completion already
     * polled can still read it. This caller waits for the release, briefly. {@code notifyHandler}: the handler is
     * told (none is, on the active side: the caller of connect gets the exception).
     */
    public void setupFailed(FabricException why, boolean notifyHandler) {
        commands.setupFailed(new ChannelCommands.SetupFailure(why, notifyHandler, false));
        life.awaitClosed(CLOSE_GRACE_NANOS);
    }

    /** Active side: the accept reply was not acceptable; the loop tears the established connection down properly. */
    public void failHandshake(FabricException why) {
        commands.setupFailed(new ChannelCommands.SetupFailure(why, false, true));
        life.awaitClosed(life.closeWaitNanos());
    }

    /**
     * SETUP_FAILED, on the loop (or where no loop runs it): a queue pair the fabric was creating is gone, or ours to
     * abort; an established one whose accept reply was refused drains first.
     */
    private void applySetupFailure(ChannelCommands.SetupFailure failure) {
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
            notifyClosed();
        }
    }

    /**
     * Our completion loop died: nobody will poll this queue pair's completions, so there is nothing to drain. The
     * queue pair goes to error and is destroyed at once, then the handler hears the cause; all on the dying loop's
     * thread, which polls nothing any more, so the memory is released here (nobody else would). One not attached
     * yet is refused by {@link #attach} instead.
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
            notifyClosed();
        }
    }

    // ------------------------------------------------------------------------------------------------ public API

    @Override
    public String id() {
        return id;
    }

    @Override
    public InetSocketAddress localAddress() {
        return local;
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
        if (capacity > config.maxFrameSize()) {
            throw new IllegalArgumentException("channel " + id + ": buffer of " + capacity
                    + " bytes exceeds maxFrameSize " + config.maxFrameSize());
        }
        try {
            return resources.pool().allocate(capacity);
        } catch (FabricException e) {
            throw new SendMemoryException(noSendMemory(capacity, e).getMessage(), e);
        }
    }

    /** Why a send buffer of {@code bytes} could not be had; the pool's reason names the key that raises the bound. */
    private FabricException noSendMemory(int bytes, FabricException why) {
        return new FabricException("channel " + id + " (peer " + describe(remote) + "): no registered memory for a "
                + bytes + "-byte send buffer: " + why.getMessage(), why);
    }

    /** A frame this connection cannot carry: the message says whose maximum it exceeds and where to raise it. */
    private FrameTooLargeException tooLarge(int length, int max) {
        boolean peers = max < config.maxFrameSize();
        return new FrameTooLargeException("channel " + id + " (peer " + describe(remote) + "): frame of " + length
                + " bytes exceeds the maximum frame size " + max + (peers
                ? " that the peer accepts (its handshake); raise maxFrameSize on the peer's side"
                : " of this side; raise maxFrameSize (on both sides)"), length, max);
    }

    @Override
    public void write(SendBuffer buffer, boolean flush) throws FabricException {
        BufferPool pool = resources.pool();
        if (!(buffer instanceof PooledBuffer.Lease lease) || lease.pooled().pool() != pool) {
            writeForeign(buffer, flush);
            return;
        }
        PooledBuffer frame = lease.pooled();
        int length = frame.buffer().position();
        if (!lease.transferToChannel()) {
            throw new IllegalStateException("channel " + id + ": send buffer was already written or released");
        }
        writeOwned(frame, length, flush);
    }

    /** A send buffer that is not our registered memory: copied into some, then released. */
    private void writeForeign(SendBuffer buffer, boolean flush) throws FabricException {
        ByteBuffer b = buffer.buffer().duplicate();
        b.flip();
        try {
            write(b, flush);
        } finally {
            buffer.release();
        }
    }

    /** Queues {@code frame}, the channel's from now on (released by it on every outcome), and flushes if asked. */
    private void writeOwned(PooledBuffer frame, int length, boolean flush) throws FabricException {
        frame.startFrame(length);
        lock.lock();
        try {
            if (!acceptsWrites()) {
                frame.releaseFromChannel();
                throw life.closedException();
            }
            int max = send.maxWritable();
            if (length > max) {
                frame.releaseFromChannel();
                throw tooLarge(length, max);
            }
            FabricException overCap = send.overQueueCap(length);
            if (overCap != null) {
                frame.releaseFromChannel();
                life.fail(overCap); // this connection holds the memory: it fails, not the next one to ask for some
                throw overCap;
            }
            send.enqueue(frame);
            if (flush) {
                writerFlushLocked();
            }
            if (send.updateWritability()) {
                resources.wakeLoop(); // its tick watches unwritableTimeout from now, even if it was idle
            }
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void write(ByteBuffer frame, boolean flush) throws FabricException {
        int length = frame.remaining();
        if (length > config.maxFrameSize()) {
            throw tooLarge(length, config.maxFrameSize());
        }
        if (!isOpen()) {
            throw life.closedException();
        }
        PooledBuffer b;
        try {
            b = resources.pool().allocateForChannel(length); // the channel's at once: no lease, nothing allocated
        } catch (FabricException e) {
            throw noSendMemory(length, e);
        }
        b.buffer().put(0, frame, frame.position(), length).position(length); // absolute: no view of the caller's
        writeOwned(b, length, flush);
    }

    @Override
    public void flush() throws FabricException {
        lock.lock();
        try {
            if (life.state().tearingDown()) {
                throw life.closedException();
            }
            writerFlushLocked();
            send.updateWritability();
        } finally {
            lock.unlock();
        }
    }

    /**
     * A writer's flush: everything it queued may go; posted here, unless the completion loop is handling a batch right
     * now and this is another thread; then the loop posts it after the batch, with whatever else queued on this
     * channel meanwhile, as one list ({@link CompletionLoop#handling}). A loop that is blocked or spinning never delays
     * a write: the writer posts.
     */
    private void writerFlushLocked() {
        send.markFlushed();
        CompletionLoop l = resources.loop();
        if (life.state() == ChannelState.OPEN && l != null && l.handling() && !l.isLoopThread()) {
            if (flushLeftToLoop) {
                send.flushesToLoop++; // already asked, not yet done: the loop takes this lock before it posts
                return;
            }
            flushLeftToLoop = true;
            if (l.takeFlush(this)) {
                send.flushesToLoop++;
                return;
            }
            // the loop ended its batch meanwhile and may not look at the request before its next one: post here
            // (when it does look, it finds nothing left)
            flushLeftToLoop = false;
        }
        life.flush(true);
    }

    /**
     * The completion loop posts what writers left to it (see {@link #writerFlushLocked}); returns whether the
     * channel has a deadline running. Loop thread.
     */
    @Override
    public boolean flushLeftToLoop() {
        boolean notifyWritable;
        boolean notifyClosed;
        boolean deadline;
        lock.lock();
        try {
            flushLeftToLoop = false;
            life.flush(true); // as the writers would have: a stream's flush may wait behind a signaled SEND
            notifyWritable = send.takeWritableOwed(!life.state().tearingDown());
            notifyClosed = life.releasedUntold();
            deadline = life.deadlineRunning();
        } finally {
            lock.unlock();
        }
        callbacks(false, notifyWritable, notifyClosed);
        return deadline;
    }

    @Override
    public boolean isWritable() {
        return send.isWritable();
    }

    @Override
    public void setAutoRead(boolean autoRead) {
        lock.lock();
        try {
            CreditWindow credits = send.credits();
            if (credits.isReturning() == autoRead) {
                return;
            }
            credits.setReturning(autoRead);
            LOG.debug("channel {}: autoRead {}", id, autoRead);
            if (autoRead) {
                life.flush(false); // owed credit goes back now, in a credit frame if no data carries it
            }
        } finally {
            lock.unlock();
        }
    }

    @Override
    public boolean isOpen() {
        return acceptsWrites();
    }

    /** Neither closing nor closed, and no close asked for (any thread: three volatile reads). */
    private boolean acceptsWrites() {
        return life.acceptsWrites() && !commands.closeAsked();
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

    /**
     * Carries out what other threads asked ({@link ChannelCommands}): the establishment first (rdma_cm's ESTABLISHED,
     * then connect's return, CONNECTED), with the handshake deadline after it (whichever of the two reached the
     * channel, an open channel outlives its deadline), then a failed set-up (SETUP_FAILED), then rdma_cm's
     * DISCONNECTED (it reports ESTABLISHED before it), then the local requests, close before forceClose. On the loop
     * thread; on the asking thread only where no loop polls for the channel. Returns whether a deadline runs.
     */
    @Override
    public boolean runCommands(int requests) {
        if ((requests & ChannelCommands.ESTABLISHED) != 0) {
            onEstablished();
        }
        if ((requests & ChannelCommands.CONNECTED) != 0) {
            applyConnected(commands.connected());
        }
        if ((requests & ChannelCommands.HANDSHAKE_EXPIRED) != 0) {
            commands.expiry().applyExpiry();
        }
        if ((requests & ChannelCommands.SETUP_FAILED) != 0) {
            applySetupFailure(commands.setupFailure());
        }
        lock.lock();
        try {
            if ((requests & ChannelCommands.DISCONNECTED) != 0) {
                life.peerDisconnected(commands.disconnectReason());
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

    /** Whether requests of other threads wait for the loop (tests). */
    boolean commandsPending() {
        return commands.pending();
    }

    boolean isClosed() {
        return life.state() == ChannelState.CLOSED;
    }

    ChannelState state() {
        return life.state();
    }

    /**
     * Why the channel is closing or closed, null for a clean local close (for tests: a channel that was never
     * established has no handler to tell). Without the lock, as every reader below (see {@link #debugState}).
     */
    FabricException closeCause() {
        return life.cause();
    }

    /** State moves made off the channel's loop thread while it had one (for tests: see ChannelLifecycle). */
    int movesOffLoop() {
        return life.movesOffLoop();
    }

    /**
     * The states the channel went through, in order (for tests: see {@link ChannelState#path}); without the lock, so
     * complete up to the state a caller last read ({@link #state}, {@link #isClosed}).
     */
    String path() {
        return life.path();
    }

    /** Whether teardown gave up waiting for work requests (for tests: after a partial post it must not). */
    boolean drainTimedOut() {
        return life.drainTimedOut();
    }

    @Override
    public long registeredBytes() {
        return resources.registeredBytes();
    }

    @Override
    public boolean olderPeer() {
        return olderPeer;
    }

    @Override
    public TransportStats stats() {
        return new TransportStats(send.framesSent, send.bytesSent, receive.framesReceived, receive.bytesReceived,
                send.creditFramesSent, receive.creditFramesReceived, send.creditStalls, send.sendQueueStalls,
                send.sendsPosted, send.signaledSends, send.inlineSends, send.postCalls, send.framesPacked,
                send.packedSends, send.flushesToLoop, send.immediateSends);
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
     * Internal state for diagnostics: credits, queue and ring occupancy. Like every reader of monitoring and tests
     * ({@link #stats}, {@link #sharedPool}, {@link #registeredBytes}, {@link #closeCause}, {@link #movesOffLoop},
     * {@link #drainTimedOut}, {@link #receivesPostedOrAwaitingRepost}), it never takes the lock, so it never waits
     * for a writer or the loop: the state, the path and the lifecycle's facts are published where they change (the
     * facts before the state they lead to), the send side's numbers are each a recent value, not one instant's.
     */
    String debugState() {
        return id + " " + life.state() + " " + send.debugState() + " receives=" + resources.receivesOutstanding()
                + " " + shared + " movesOffLoop=" + life.movesOffLoop() + " path=" + life.path();
    }

    /** The channel's lock, for the tests that hold it to show a reader does not wait for it. */
    ReentrantLock lockForTests() {
        return lock;
    }

    @Override
    public String toString() {
        return "RdmaChannel[" + id + " " + describe(local) + " -> " + describe(remote) + " " + life.state() + "]";
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

    private void deliver(ByteBuffer frame) {
        ChannelHandler h = handler.get();
        if (h == null) {
            return; // a connection that failed before it was established: the application never accepted it
        }
        try {
            h.onFrame(this, frame);
        } catch (RuntimeException | Error e) {
            if (HANDLER_FAILED.admit()) {
                LOG.error("channel {} ({}): handler failed on a frame of {} bytes", id, describe(remote),
                        frame.limit(), e);
            }
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
        callbacks(delivered, notifyWritable, notifyClosed);
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
                life.fail(new FabricException("channel " + id + " (peer " + describe(remote) + "): " + evicted));
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
                int posted = posted(e, repost.size());
                resources.receivesPosted(posted); // those complete (flushed) and are waited for; the rest never will
                life.fail(new FabricException("channel " + id + " (" + describe(remote)
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
        callbacks(false, notifyWritable, notifyClosed);
        return pending || notifyWritable;
    }

    private void callbacks(boolean delivered, boolean notifyWritable, boolean notifyClosed) {
        ChannelHandler h = handler.get();
        if (h == null) {
            delivered = false; // not established yet: nothing was delivered, nobody is owed writability
            notifyWritable = false;
        }
        try {
            if (delivered && !notifyClosed) {
                h.onEndOfBatch(this);
            }
            if (notifyWritable) {
                h.onWritable(this);
            }
        } catch (RuntimeException | Error e) {
            if (CALLBACK_FAILED.admit()) {
                LOG.error("channel {} ({}): handler callback failed", id, describe(remote), e);
            }
        }
        if (notifyClosed) {
            notifyClosed();
        }
    }

    /** The channel is released: the transport forgets it, closers stop waiting, and the handler hears why, once. */
    private void notifyClosed() {
        ChannelLifecycle.ClosedNotice notice;
        lock.lock();
        try {
            notice = life.takeClosedNotice();
        } finally {
            lock.unlock();
        }
        if (notice == null) {
            return;
        }
        transport.channelClosed(this);
        life.closedNotified();
        ChannelHandler h = handler.takeForNotice();
        if (h != null && !notice.silent()) {
            try {
                h.onClosed(this, notice.cause());
            } catch (RuntimeException | Error e) {
                if (ON_CLOSED_FAILED.admit()) {
                    LOG.error("channel {} ({}): onClosed failed", id, describe(remote), e);
                }
            }
        }
    }

    static String describe(InetSocketAddress a) {
        return Endpoints.describe(a);
    }
}
