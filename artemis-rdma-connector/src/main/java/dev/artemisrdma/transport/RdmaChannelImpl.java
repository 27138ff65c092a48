package dev.artemisrdma.transport;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One connection over one RC queue pair: the lifecycle, and the public {@link RdmaChannel} API, wiring together a
 * {@link SendSide} and a {@link ReceiveSide}.
 *
 * <p>Threads, one owner per part:
 * <ul>
 *   <li>Lifecycle ({@link ChannelState}, teardown bookkeeping, the queue pair and the connection's memory): guarded
 *       by {@link #lock}. Writers, the connection manager and the completion loop all take it.</li>
 *   <li>{@link SendSide}: guarded by the same lock (the fabric forbids concurrent posts on one queue pair, and the
 *       loop posts reposts and credit frames too).</li>
 *   <li>{@link ReceiveSide}: the completion loop thread alone, without the lock; what a batch taught is applied
 *       under the lock once per batch, in {@link #endOfBatch}.</li>
 * </ul>
 * The connection's memory is released only on the completion loop thread (teardown ends in {@link #endOfBatch} or
 * {@link #tick}), so the receive side never reads memory that is gone. Handler callbacks are made on the loop
 * thread and never under the lock, so a handler may write, and a writer holding its own locks cannot deadlock
 * against a callback.
 *
 * <p>Memory. One registration per connection holds the receive slots ({@code slots * slotSize}) followed by the
 * send headers ({@link SendRing#HEADER_STRIDE} per send ring slot). It is released only after the queue pair is
 * destroyed, and every send buffer stays with the ring until its work request is known complete.
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
final class RdmaChannelImpl implements RdmaChannel {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaChannelImpl.class);
    static final long RECV_BIT = ReceiveSide.RECV_BIT;
    private static final long DRAIN_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(5);
    /** How long a teardown caused by flushes alone waits for the disconnect event that explains them. */
    private static final long FLUSH_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(200);
    /** What a closing caller waits beyond closeTimeout for the disconnect and release (done on the loop thread). */
    static final long CLOSE_GRACE_NANOS = TimeUnit.SECONDS.toNanos(1);

    private final RdmaTransport transport;
    private final TransportConfig config;
    private final String id;
    private final InetSocketAddress remote;
    private final int slots;
    private final int slotSize;
    private final ReentrantLock lock = new ReentrantLock();
    private final CountDownLatch closed = new CountDownLatch(1);
    private final SendSide send;
    private final ReceiveSide receive;
    /**
     * Consumed slots are reposted in groups of this many: one ibv_post_recv per group instead of one per frame. Safe
     * for credits, which are returned only for receives actually reposted; at most repostBatch - 1 slots wait.
     */
    private final int repostBatch;

    private volatile ChannelHandler handler;
    private volatile InetSocketAddress local;
    private volatile BufferPool pool;
    private volatile ChannelState state = ChannelState.CONNECTING;
    private volatile int qpNumber = -1;
    /** The channel's place in its loop's shared receive pool, if it takes its receives from one. */
    private final SharedReceiveMembership shared;
    /** The device {@link #bindBeforeAccept} bound to; null when the queue pair's set-up binds. */
    private FabricDevice boundEarly;

    // lifecycle; guarded by lock
    private CompletionLoop loop;
    /** A writer left this channel's flush to the loop, which has not done it yet (under {@link #lock}). */
    private boolean flushLeftToLoop;
    private volatile int index = -1; // read by the loop thread
    private int reservedEntries;
    /** See {@link #queuePairPending(boolean)} (under {@link #lock}). */
    private boolean queuePairPending;
    private RegisteredMemory memory;
    private QueuePair qp;
    private int receivesOutstanding;
    /**
     * The loop's poll count when a shared channel's drain was first checked, after the drain began; -1 before (loop
     * thread). The drain is proven by a poll that began after it and found the queue drained.
     */
    private long drainFence = -1;
    private FabricException cause;
    private boolean closeRequested;
    private boolean goodbyeSent;
    private boolean closedNotified;
    private boolean silent;
    private boolean causeIsFlush;
    /** The reason rdma_cm gave for the peer's disconnect, until the drain settles the cause (under the lock). */
    private String peerDisconnect;
    /** The drain was begun by the peer's disconnect: successful receives are still delivered (loop thread reads). */
    private volatile boolean peerDrain;
    private boolean drainTimedOut;
    private long closeDeadline;
    private long drainDeadline;
    private long flushGraceDeadline;

    /** Set by the completion loop while this channel is in its current batch (loop thread only). */
    boolean touched;
    /** Completions and errors, counted by the completion loop (see ChannelCounters). */
    final ChannelCounters counters = new ChannelCounters();

    RdmaChannelImpl(RdmaTransport transport, TransportConfig config, String id, InetSocketAddress remote,
                    InetSocketAddress local, ChannelHandler handler) {
        this.transport = transport;
        this.config = config;
        this.id = id;
        this.remote = remote;
        this.local = local;
        this.handler = handler;
        this.slots = config.postedReceives();
        this.slotSize = config.slotSize();
        this.repostBatch = config.repostBatch();
        this.send = new SendSide(config, id, remote, config.creditThresholdInForce());
        this.receive = new ReceiveSide(config, id, remote, slots, transport.reassemblyBudget(), this::deliver);
        send.credits().offered(slots); // what localParams() offers
        this.shared = new SharedReceiveMembership(config, send.credits());
    }

    /**
     * What this side offers the peer in the handshake. Every side states credit growth (it takes grants up to the
     * maximum its peer states); only one on a shared pool offers a window that grows (minimum up to receiveSlots + 1).
     */
    Handshake.Params localParams() {
        int features = Handshake.FEATURE_PACKED | Handshake.FEATURE_CREDIT_GROWTH
                | Handshake.FEATURE_IMMEDIATE_FRAGMENTS | Handshake.FEATURE_CREDIT_RECALL;
        if (shared.shares()) {
            return new Handshake.Params(slotSize, TransportConfig.SHARED_MIN_CREDITS, config.maxFrameSize(), features,
                    config.sharedMaxCredits());
        }
        return new Handshake.Params(slotSize, slots, config.maxFrameSize(), features, slots);
    }

    /**
     * Takes receives from the completion loop's shared pool instead of posting its own: before bind, on the passive
     * side, for a peer that accepts credit growth.
     */
    void shareReceives() {
        lock.lock();
        try {
            shared.share();
        } finally {
            lock.unlock();
        }
    }

    boolean sharesReceives() {
        return shared.shares();
    }

    /** The pool this channel takes its receives from while it holds credits there; null otherwise. */
    SharedReceivePool sharedPool() {
        lock.lock();
        try {
            return shared.pool();
        } finally {
            lock.unlock();
        }
    }

    /** Called by the loop that admitted this channel to its pool (under our lock, from bind). */
    void useSharedPool(SharedReceivePool pool, SharedReceivePool.Allocation allocation) {
        shared.admitted(pool, allocation);
    }

    /**
     * Completion queue entries this connection can ever have outstanding: all receives plus the send budget; on a
     * shared pool the send budget alone (the loop reserves the pool's receives once).
     */
    int completionEntries() {
        return config.completionEntriesPerConnection(shared.shares());
    }

    /** Bytes of this connection's own registration: receive slots (unless shared) and send headers. */
    private int ownRegistrationBytes() {
        return config.registeredBytesPerConnection(shared.shares());
    }

    void setHandler(ChannelHandler handler) {
        this.handler = handler;
    }

    /**
     * The peer's handshake: how we must fragment for it and what it grants.
     *
     * @throws FabricException when its values break the credit window's bound (a protocol error)
     */
    void setPeer(Handshake.Params peer) throws FabricException {
        lock.lock();
        try {
            send.peer(peer);
            if (!peer.readsPacked()) {
                LOG.info("channel {} ({}): the peer does not read packed SENDs (an older artemis-rdma): small frames"
                        + " go one per SEND", id, describe(remote));
            }
        } finally {
            lock.unlock();
        }
    }

    /** The connection-manager side of this channel: builds its queue pair and follows its events. */
    ConnectionSetup setup() {
        return new ConnectionSetup() {
            @Override
            public QueuePairSpec queuePairSpec(FabricDevice device) throws FabricException {
                bindUnlessBound(device);
                queuePairPending(true);
                if (shared.shares()) {
                    return new QueuePairSpec(loop.completionQueue(), config.sendQueueDepth(), 1, 2, 1,
                            config.maxInlineData(), shared.queue());
                }
                return new QueuePairSpec(loop.completionQueue(), config.sendQueueDepth(), slots, 2, 1,
                        config.maxInlineData());
            }

            @Override
            public void prepare(QueuePair queuePair) throws FabricException {
                attach(queuePair);
            }
        };
    }

    QueuePairEvents events() {
        return new QueuePairEvents() {
            @Override
            public void established(QueuePair queuePair) {
                onEstablished();
            }

            @Override
            public void disconnected(QueuePair queuePair, String reason) {
                onDisconnected(reason);
            }
        };
    }

    void usePool(BufferPool pool) {
        this.pool = pool;
    }

    /** Whether this channel's memory comes from {@code pool} (so from that pool's device). */
    boolean usesPool(BufferPool pool) {
        return this.pool == pool;
    }

    /**
     * Binds an accepted connection to its loop and memory on {@code device} before the accept, so that a refusal (every
     * loop full, memory refused) can still reject the request with its reason: once an accept has begun, librdmacm's
     * own reject carries none, and the client would read "nobody listens on that port".
     */
    void bindBeforeAccept(FabricDevice device) throws FabricException {
        bind(device);
        boundEarly = device;
    }

    private void bindUnlessBound(FabricDevice device) throws FabricException {
        if (boundEarly == null) {
            bind(device);
        } else if (boundEarly != device) {
            throw new FabricException("channel " + id + " was bound to " + boundEarly.name() + " but its queue pair "
                    + "is asked for on " + device.name());
        }
    }

    /** Takes a completion loop slot and registers this connection's memory on the device the route chose. */
    private void bind(FabricDevice device) throws FabricException {
        lock.lock();
        try {
            if (loop != null) {
                throw new IllegalStateException("channel " + id + " already bound");
            }
            if (pool == null) {
                pool = transport.pool(device);
            }
            reservedEntries = completionEntries();
            CompletionLoop.Assignment a = transport.assignLoop(device, this, reservedEntries);
            loop = a.loop();
            index = a.index();
            try {
                memory = device.register(ownRegistrationBytes());
            } catch (FabricException | RuntimeException e) {
                shared.release();
                loop.unregister(index, reservedEntries);
                loop = null;
                index = -1;
                throw e;
            }
            if (!shared.shares()) {
                receive.attach(memory, index);
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * The queue pair exists: size the send side by what it really got, and post every receive. From this call on the
     * queue pair is this channel's, whatever follows: the fabric hands it over and never destroys it, the channel does
     * (on a failure here, through {@link #abortUnestablished}, which the transport calls). Only a CONNECTING channel
     * takes one: a channel released meanwhile (its handshake deadline passed, or its loop died, while the accept was
     * under way) has no memory to post receives into and no loop to poll them, so the queue pair is destroyed here.
     */
    private void attach(QueuePair queuePair) throws FabricException {
        lock.lock();
        try {
            queuePairPending = false;
            if (state != ChannelState.CONNECTING) {
                queuePair.close();
                releaseDeferredSlotLocked(); // the queue pair that kept the loop's queue from going is gone
                throw new FabricException("channel " + id + " (" + describe(remote) + ") was " + state
                        + " before its queue pair was ready" + (cause == null ? "" : ": " + cause.getMessage()));
            }
            qp = queuePair;
            qpNumber = queuePair.qpNumber();
            if (loop.failure() != null) {
                throw loop.failure(); // its queue outlives us only until we let go: the abort destroys qp
            }
            local = queuePair.localAddress();
            QueuePairCaps caps = queuePair.caps();
            if (caps.maxSendSge() < 2) {
                throw new FabricException("channel " + id + ": queue pair offers " + caps.maxSendSge()
                        + " send scatter-gather entries, the transport needs 2");
            }
            if (shared.shares()) {
                send.attach(queuePair, caps, memory, 0, index, pool);
                loop.mapQueuePair(qpNumber, this); // before the peer can send: its SENDs complete on the pool
                return;
            }
            if (caps.maxRecvWr() < slots) {
                throw new FabricException("channel " + id + ": queue pair takes " + caps.maxRecvWr()
                        + " receives, the transport posts " + slots);
            }
            send.attach(queuePair, caps, memory, config.receiveRegionBytes(), index, pool);
            RecvList initial = new RecvList(slots);
            for (int s = 0; s < slots; s++) {
                receive.addReceive(initial, s);
            }
            try {
                queuePair.postRecv(initial);
                receivesOutstanding = slots;
            } catch (FabricException e) {
                receivesOutstanding = posted(e, initial.size());
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

    /** Active side: connect returned with the peer's accept. */
    void activeEstablished(Handshake.Params peer) throws FabricException {
        setPeer(peer);
        onEstablished();
    }

    private void onEstablished() {
        lock.lock();
        try {
            // the active side learns the peer's handshake when connect returns; an early event waits for it
            if (state == ChannelState.CONNECTING && send.isReady()) {
                moveTo(ChannelState.OPEN);
                LOG.debug("channel {} established: {} -> {}", id, describe(local), describe(remote));
                flushLocked();
                if (closeRequested && state == ChannelState.OPEN) {
                    beginOrderlyCloseLocked();
                }
            }
        } finally {
            lock.unlock();
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
        if (state != ChannelState.CONNECTING || status != WcStatus.SUCCESS) {
            return; // an open channel's completions leave here after one volatile read
        }
        lock.lock();
        try {
            if (state != ChannelState.CONNECTING || !send.isReady() || qp == null) {
                return;
            }
            LOG.debug("channel {}: the peer's first frame arrived before rdma_cm's ESTABLISHED event; open now", id);
            qp.establishedByPeer();
            onEstablished();
        } finally {
            lock.unlock();
        }
    }

    private void onDisconnected(String reason) {
        lock.lock();
        try {
            if (state == ChannelState.CLOSED || state == ChannelState.RELEASING
                    || (state == ChannelState.DRAINING && !causeIsFlush)) {
                return; // our own disconnect coming back, or already failing
            }
            // The cause is settled when the drain ends, not here: the peer's last frames (its goodbye among them)
            // may still wait in the completion queue, and only the loop thread can tell whether they came.
            if (!closeRequested || !send.outboxEmpty()) {
                peerDisconnect = reason;
            }
            peerDrain = true; // what the peer sent before disconnecting is still delivered
            if (state == ChannelState.DRAINING) {
                cause = null; // the disconnect explains the flushes seen before it
                causeIsFlush = false;
                return;
            }
            beginDisconnectLocked(null);
        } finally {
            lock.unlock();
        }
    }

    /** After the drain: a peer's disconnect is an orderly close if its goodbye arrived, else a lost connection. */
    private void settlePeerDisconnectLocked() {
        if (peerDisconnect == null || (cause != null && !causeIsFlush)) {
            return;
        }
        cause = new FabricException(receive.remoteClosing()
                ? "channel " + id + ": peer " + describe(remote) + " closed the connection"
                : "channel " + id + ": connection to " + describe(remote) + " lost: " + peerDisconnect);
        causeIsFlush = false;
        peerDisconnect = null;
        LOG.info("{}", cause.getMessage());
    }

    /**
     * The handshake deadline passed (timer thread). Decided under the lock, so that the peer's first frame or rdma_cm's
     * ESTABLISHED, which open the channel under it, either came first (the deadline does nothing) or come too late
     * (the channel is already released). Returns whether the deadline released the channel.
     */
    boolean expireHandshake(java.time.Duration timeout) {
        FabricException why;
        boolean releasedHere;
        lock.lock();
        try {
            if (state != ChannelState.CONNECTING) {
                // opened by the peer's first frame before rdma_cm's ESTABLISHED event, or already failing for a
                // reason of its own: its teardown goes on, with that reason
                return false;
            }
            why = new FabricException("connection " + id + " from " + describe(remote) + " did not complete its "
                    + "handshake within " + timeout.toMillis() + " ms (raise handshakeTimeout); its queue pair and "
                    + "memory are released");
            releasedHere = beginAbortLocked(why, true, false);
        } finally {
            lock.unlock();
        }
        LOG.warn("{}", why.getMessage());
        finishAbort(releasedHere);
        return true;
    }

    /**
     * Connect or accept failed before the channel was established: release what bind/attach took. The queue pair
     * is destroyed here; the memory is released by the loop thread (a completion already polled may still be read
     * there), which this waits for, briefly.
     */
    void abortUnestablished(FabricException why, boolean notifyHandler) {
        abortUnestablished(why, notifyHandler, false);
    }

    /**
     * {@code loopGone}: called on our completion loop's thread as it dies; it polls nothing any more, so the memory
     * is released here (nobody else would).
     */
    private void abortUnestablished(FabricException why, boolean notifyHandler, boolean loopGone) {
        boolean releasedHere;
        lock.lock();
        try {
            releasedHere = beginAbortLocked(why, notifyHandler, loopGone);
        } finally {
            lock.unlock();
        }
        finishAbort(releasedHere);
    }

    /**
     * The queue pair goes at once, and the memory too when no loop thread will release it (no loop slot taken, or the
     * loop is dead and polls nothing any more); else the loop releases it at its next tick (RELEASING). A channel
     * already RELEASING whose loop is gone is released here: nobody else would. Returns whether it was released here.
     */
    private boolean beginAbortLocked(FabricException why, boolean notifyHandler, boolean loopGone) {
        boolean noLoopWillRelease = index < 0 || loopGone || (loop != null && loop.failure() != null);
        if (state == ChannelState.CLOSED || (state == ChannelState.RELEASING && !noLoopWillRelease)) {
            return false;
        }
        if (state != ChannelState.RELEASING) {
            silent = !notifyHandler; // before any thread can see the channel closing
            if (state == ChannelState.OPEN || state == ChannelState.CLOSING) {
                beginDisconnectLocked(why);
            }
            if (cause == null) {
                cause = why;
            }
            if (qp != null) {
                qp.close(); // never established, or established and failed: the fabric flushed nothing we wait for
                receivesOutstanding = 0;
            }
        }
        if (noLoopWillRelease) {
            moveTo(ChannelState.CLOSED);
            releaseLocked();
            return true;
        }
        moveTo(ChannelState.RELEASING);
        return false;
    }

    private void finishAbort(boolean releasedHere) {
        if (releasedHere) {
            notifyClosed();
        } else {
            awaitClosed(CLOSE_GRACE_NANOS);
        }
    }

    /**
     * Our completion loop died: nobody will poll this queue pair's completions, so there is nothing to drain. The
     * queue pair goes to error and is destroyed at once, then the handler hears the cause. One not attached yet is
     * refused by {@link #attach} instead.
     */
    void loopFailed(FabricException why) {
        lock.lock();
        try {
            if (state == ChannelState.CLOSED || (qp == null && state != ChannelState.RELEASING)) {
                return; // released already, or not attached yet (attach refuses, and its abort releases)
            }
            if (cause == null) {
                cause = why; // before the disconnect event can offer a lesser reason
            }
            if (qp != null) {
                qp.disconnect();
            }
        } finally {
            lock.unlock();
        }
        abortUnestablished(why, true, true);
    }

    /** Active side: the accept reply was not acceptable; tear the established connection down properly. */
    void failHandshake(FabricException why) {
        lock.lock();
        try {
            silent = true; // the caller of connect gets the exception; the handler never saw this channel
            if (state.compareTo(ChannelState.CLOSING) <= 0) {
                beginDisconnectLocked(why);
            }
        } finally {
            lock.unlock();
        }
        awaitClosed(closeWaitNanos());
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
            return pool.allocate(capacity);
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
        if (!(buffer instanceof PooledBuffer.Lease lease) || lease.pooled().pool() != pool) {
            // not our registered memory: copy it into some
            ByteBuffer b = buffer.buffer().duplicate();
            b.flip();
            try {
                write(b, flush);
            } finally {
                buffer.release();
            }
            return;
        }
        PooledBuffer frame = lease.pooled();
        int length = frame.buffer().position();
        if (!lease.transferToChannel()) {
            throw new IllegalStateException("channel " + id + ": send buffer was already written or released");
        }
        frame.frameLength = length;
        frame.sentOffset = 0;
        lock.lock();
        try {
            if (state.compareTo(ChannelState.OPEN) > 0 || closeRequested) {
                frame.releaseFromChannel();
                throw closedException();
            }
            int max = send.maxWritable();
            if (length > max) {
                frame.releaseFromChannel();
                throw tooLarge(length, max);
            }
            send.enqueue(frame);
            if (flush) {
                writerFlushLocked();
            }
            send.updateWritability();
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
            throw closedException();
        }
        PooledBuffer.Lease b;
        try {
            b = pool.allocate(length);
        } catch (FabricException e) {
            throw noSendMemory(length, e);
        }
        b.buffer().put(frame.duplicate());
        write(b, flush);
    }

    @Override
    public void flush() throws FabricException {
        lock.lock();
        try {
            if (state.tearingDown()) {
                throw closedException();
            }
            writerFlushLocked();
            send.updateWritability();
        } finally {
            lock.unlock();
        }
    }

    /**
     * A writer's flush: everything it queued may go; posted here, unless the completion loop is handling a batch right now and this is another
     * thread; then the loop posts it after the batch, with whatever else queued on this channel meanwhile, as one
     * list ({@link CompletionLoop#handling}). A loop that is blocked or spinning never delays a write: the writer
     * posts.
     */
    private void writerFlushLocked() {
        send.markFlushed();
        CompletionLoop l = loop;
        if (state == ChannelState.OPEN && l != null && l.handling() && !l.isLoopThread()) {
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
        flushLocked(true);
    }

    /**
     * The completion loop posts what writers left to it (see {@link #writerFlushLocked}); returns whether the
     * channel has a deadline running. Loop thread.
     */
    boolean flushLeftToLoop() {
        boolean notifyWritable;
        boolean notifyClosed;
        boolean deadline;
        lock.lock();
        try {
            flushLeftToLoop = false;
            flushLocked(true); // as the writers would have: a stream's flush may wait behind a signaled SEND
            notifyWritable = send.takeWritableOwed(!state.tearingDown());
            notifyClosed = state == ChannelState.CLOSED && !closedNotified;
            deadline = deadlineRunningLocked();
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
                flushLocked(); // owed credit goes back now, in a credit frame if no data carries it
            }
        } finally {
            lock.unlock();
        }
    }

    @Override
    public boolean isOpen() {
        return state.compareTo(ChannelState.OPEN) <= 0 && !closeRequested;
    }

    /** Orderly close; returns within closeTimeout + {@link #CLOSE_GRACE_NANOS} whatever the peer does. */
    @Override
    public void close() {
        lock.lock();
        try {
            if (!closeRequested && state.compareTo(ChannelState.CLOSING) < 0) {
                closeRequested = true;
                closeDeadline = System.nanoTime() + config.closeTimeout().toNanos();
                if (state == ChannelState.OPEN) {
                    beginOrderlyCloseLocked();
                } else if (loop != null) {
                    loop.wake(); // CONNECTING: established() or the connect's failure completes the close, or the
                                 // deadline, which the loop's tick watches from now on
                }
            }
        } finally {
            lock.unlock();
        }
        awaitClosed(closeWaitNanos());
    }

    /** Immediate close; returns within closeTimeout + {@link #CLOSE_GRACE_NANOS} like {@link #close()}. */
    @Override
    public void forceClose() {
        lock.lock();
        try {
            closeRequested = true;
            if (state.compareTo(ChannelState.CLOSING) <= 0 && qp != null) {
                beginDisconnectLocked(null);
            } else if (loop != null) {
                loop.wake(); // not connected yet: the loop's tick watches the close from now on
            }
        } finally {
            lock.unlock();
        }
        awaitClosed(closeWaitNanos());
    }

    private long closeWaitNanos() {
        return config.closeTimeout().toNanos() + CLOSE_GRACE_NANOS;
    }

    /**
     * Blocks until released or {@code nanos} passed, unless called on the completion loop itself (which must go on
     * to do the release). Past the bound, teardown goes on in the loop; the caller does not wait for it.
     */
    private void awaitClosed(long nanos) {
        CompletionLoop l = loop;
        if (l == null || l.isLoopThread() || state == ChannelState.CLOSED) {
            return;
        }
        try {
            if (!closed.await(nanos, TimeUnit.NANOSECONDS)) {
                LOG.info("channel {} ({}): not released within {} ms; it finishes in the background", id,
                        describe(remote), TimeUnit.NANOSECONDS.toMillis(nanos));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    boolean isClosed() {
        return state == ChannelState.CLOSED;
    }

    ChannelState state() {
        return state;
    }

    /** Whether teardown gave up waiting for work requests (for tests: after a partial post it must not). */
    boolean drainTimedOut() {
        lock.lock();
        try {
            return drainTimedOut;
        } finally {
            lock.unlock();
        }
    }

    /** Bytes this channel has registered (receive slots and send headers); 0 before bind and after release. */
    long registeredBytes() {
        RegisteredMemory m = memory;
        return m == null ? 0 : m.length();
    }

    TransportStats stats() {
        return new TransportStats(send.framesSent, send.bytesSent, receive.framesReceived, receive.bytesReceived,
                send.creditFramesSent, receive.creditFramesReceived, send.creditStalls, send.sendQueueStalls,
                send.sendsPosted, send.signaledSends, send.inlineSends, send.postCalls, send.framesPacked,
                send.packedSends, send.flushesToLoop, send.immediateSends);
    }

    /**
     * Receive slots posted right now plus those waiting for their group's repost; with no traffic in flight that is
     * every slot: none may leak.
     */
    int receivesPostedOrAwaitingRepost() {
        lock.lock();
        try {
            return receivesOutstanding + receive.repost().size();
        } finally {
            lock.unlock();
        }
    }

    /** Internal state for diagnostics: credits, queue and ring occupancy. */
    String debugState() {
        lock.lock();
        try {
            return id + " " + state + " " + send.debugState() + " receives=" + receivesOutstanding
                    + " " + shared;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public String toString() {
        return "RdmaChannel[" + id + " " + describe(local) + " -> " + describe(remote) + " " + state + "]";
    }

    /**
     * Every state but OPEN has a deadline the loop's tick watches: a change made on another thread (a close, a
     * failure, a disconnect event) wakes the loop, which may be blocked without a timeout.
     */
    private void moveTo(ChannelState next) {
        state = state.moveTo(next, id);
        CompletionLoop l = loop;
        if (l != null && !l.isLoopThread()) {
            l.wake();
        }
    }

    /** Sends before the connection is established wait in the outbox; a failed post fails the channel. */
    private void flushLocked() {
        flushLocked(false);
    }

    /** {@code writer}: a flush the application asked for (write, flush), which may wait behind a SEND in flight. */
    private void flushLocked(boolean writer) {
        // the goodbye is the last SEND: the close waits for the ring to drain, and only the goodbye's completion
        // retires it; a credit frame after it (credit owed for what the peer sent meanwhile) would be unsignaled,
        // nothing would retire it, and the close would sit out closeTimeout. The peer needs no credit from us now.
        if (!state.sends() || goodbyeSent) {
            return;
        }
        FabricException failed = send.flush(writer);
        if (failed != null) {
            failLocked(failed);
        }
    }

    // ------------------------------------------------------------------------------ completions (loop thread)

    int qpNumber() {
        return qpNumber;
    }

    void onReceiveCompletion(int slot, int status, int byteLength, long immediate) {
        openOnPeerFrame(status);
        // a drain the peer began still delivers what it sent first: successful completions precede the flushes
        receive.onReceive(slot, status, byteLength, immediate, state.tearingDown(), peerDrain);
    }

    void onSharedReceiveCompletion(ByteBuffer poolView, int base, int status, int byteLength, long immediate) {
        openOnPeerFrame(status);
        receive.onSharedReceive(poolView, base, status, byteLength, immediate, state.tearingDown(), peerDrain);
    }

    private void deliver(ByteBuffer frame) {
        try {
            handler.onFrame(this, frame);
        } catch (RuntimeException | Error e) {
            LOG.error("channel {} ({}): handler failed on a frame of {} bytes", id, describe(remote),
                    frame.limit(), e);
        }
    }

    void onSendCompletion(int slot, int status) {
        receive.onSend(slot, status);
    }

    /**
     * Applies one batch of completions: reposts, credits, retirements; posts what can go; fires callbacks. Returns
     * whether a deadline runs now (see {@link #deadlineRunningLocked}).
     */
    boolean endOfBatch() {
        boolean delivered = receive.batchDelivered();
        boolean notifyWritable;
        boolean notifyClosed;
        boolean deadline;
        lock.lock();
        try {
            receivesOutstanding -= receive.batchReceived();
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
                        receive.batchProtocolError() == null ? receive.batchReleased() : 0, state.tearingDown());
                if (overdrawn != null) {
                    receive.protocolError(overdrawn);
                }
            }
            applyBatchOutcomeLocked();
            repostLocked();
            progressLocked();
            notifyWritable = send.takeWritableOwed(!state.tearingDown());
            notifyClosed = state == ChannelState.CLOSED && !closedNotified;
            deadline = deadlineRunningLocked();
        } finally {
            lock.unlock();
            receive.resetBatch();
        }
        callbacks(delivered, notifyWritable, notifyClosed);
        return deadline;
    }

    /**
     * Whether the loop must tick this channel soon: it is not simply open (connecting, closing, draining, released),
     * a close was asked for, frames wait in the outbox, or a frame is half reassembled.
     */
    private boolean deadlineRunningLocked() {
        return state != ChannelState.OPEN || closeRequested || !send.outboxEmpty() || receive.reassembling();
    }

    private void applyBatchOutcomeLocked() {
        FabricException protocolError = receive.batchProtocolError();
        if (protocolError != null) {
            counters.protocolError();
            failLocked(protocolError);
        } else if (receive.batchFailureStatus() >= 0) {
            failLocked(completionFailure(receive.batchFailureStatus(), receive.batchFailureWhat()));
        } else if (receive.batchFlushed() && !state.tearingDown()) {
            if (receive.remoteClosing()) {
                beginDisconnectLocked(new FabricException("channel " + id + ": peer " + describe(remote)
                        + " closed the connection"));
            } else {
                // flushes alone: the queue pair went to error, most likely a disconnect whose event is on its
                // way; teardown waits a moment for it, so its reason can replace this one
                LOG.debug("channel {} ({}): work requests flushed before any disconnect event", id,
                        describe(remote));
                beginDisconnectLocked(new FabricException("channel " + id + " (" + describe(remote)
                        + "): work requests flushed: the queue pair went to error"));
                causeIsFlush = true;
                flushGraceDeadline = System.nanoTime() + FLUSH_GRACE_NANOS;
            }
        }
    }

    /**
     * The loop's shared pool needs receives back: asks the peer to give back what it holds beyond {@code keep} (it
     * does when it has nothing queued). Loop thread; only an open channel whose window grew beyond {@code keep}, and
     * only a peer that answers recalls, is asked.
     */
    void recall(int keep) {
        lock.lock();
        try {
            if (state != ChannelState.OPEN || !shared.holdsMoreThan(keep)) {
                return;
            }
            if (send.queueRecall(keep)) {
                flushLocked();
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
        if (state.tearingDown()) {
            repost.clear(); // tearing down: consumed slots stay unposted
        } else if (repost.size() >= repostBatch) {
            try {
                qp.postRecv(repost);
                receivesOutstanding += repost.size();
                send.credits().reposted(repost.size());
            } catch (FabricException e) {
                int posted = posted(e, repost.size());
                receivesOutstanding += posted; // those complete (flushed) and are waited for; the rest never will
                failLocked(new FabricException("channel " + id + " (" + describe(remote)
                        + "): reposting receives failed after " + posted + " of " + repost.size() + ": "
                        + e.getMessage(), e));
            }
            repost.clear();
        }
    }

    /**
     * Periodic work of the loop: deadlines (close, reassembly), writability owed from other threads, release. Returns
     * whether the channel has a deadline running or work pending (not open, frames queued, a frame half reassembled):
     * a loop whose channels have none may look less often.
     */
    boolean tick(long now) {
        boolean notifyWritable;
        boolean notifyClosed;
        boolean pending;
        lock.lock();
        try {
            FabricException overdue = state.tearingDown() ? null : receive.overdueFrame(now);
            if (overdue != null) {
                failLocked(overdue); // logs it
            }
            if (state == ChannelState.CONNECTING && closeRequested && qp != null && now - closeDeadline > 0) {
                beginDisconnectLocked(null); // closed before it was established, and it never was
            }
            progressLocked(now);
            notifyWritable = send.takeWritableOwed(!state.tearingDown());
            notifyClosed = state == ChannelState.CLOSED && !closedNotified;
            pending = deadlineRunningLocked();
        } finally {
            lock.unlock();
        }
        callbacks(false, notifyWritable, notifyClosed);
        return pending || notifyWritable;
    }

    private void callbacks(boolean delivered, boolean notifyWritable, boolean notifyClosed) {
        ChannelHandler h = handler;
        try {
            if (delivered && !notifyClosed) {
                h.onEndOfBatch(this);
            }
            if (notifyWritable) {
                h.onWritable(this);
            }
        } catch (RuntimeException | Error e) {
            LOG.error("channel {} ({}): handler callback failed", id, describe(remote), e);
        }
        if (notifyClosed) {
            notifyClosed();
        }
    }

    private void notifyClosed() {
        FabricException why;
        boolean quiet;
        lock.lock();
        try {
            if (closedNotified) {
                return;
            }
            closedNotified = true;
            why = cause;
            quiet = silent;
        } finally {
            lock.unlock();
        }
        transport.channelClosed(this);
        closed.countDown();
        ChannelHandler h = handler;
        if (h != null && !quiet) {
            try {
                h.onClosed(this, why);
            } catch (RuntimeException | Error e) {
                LOG.error("channel {} ({}): onClosed failed", id, describe(remote), e);
            }
        }
    }

    // ---------------------------------------------------------------------------------------------- teardown

    /** As {@link #progressLocked(long)}; an open channel only flushes, without reading the clock (once per batch). */
    private void progressLocked() {
        if (state == ChannelState.OPEN) {
            flushLocked();
            if (state == ChannelState.OPEN) {
                return;
            }
        }
        progressLocked(System.nanoTime());
    }

    /**
     * Moves the channel on: flushes, then advances closing or draining, whose deadlines use {@code now}; a channel
     * that is done is released. Called on the loop thread only (endOfBatch, tick), which is what makes the release
     * safe against the receive side.
     */
    private void progressLocked(long now) {
        if (state.sends()) {
            flushLocked();
        }
        if (state == ChannelState.CLOSING) {
            progressOrderlyCloseLocked(now);
        }
        if (state == ChannelState.DRAINING && isDrainedLocked(now)) {
            finishTeardownLocked();
        } else if (state == ChannelState.RELEASING) {
            moveTo(ChannelState.CLOSED);
            releaseLocked();
        }
    }

    private void beginOrderlyCloseLocked() {
        send.markFlushed(); // what was written goes before the goodbye, flushed or not
        moveTo(ChannelState.CLOSING);
        flushLocked();
        if (state == ChannelState.CLOSING) {
            progressOrderlyCloseLocked(System.nanoTime());
        }
    }

    /**
     * Closing: pending frames go first, then a signaled goodbye (which also retires any unsignaled sends before it),
     * the last SEND ({@link #flushLocked(boolean)} posts nothing after it); once every send is known complete,
     * disconnect. Bounded by closeTimeout.
     */
    private void progressOrderlyCloseLocked(long now) {
        if (send.outboxEmpty()) {
            if (!goodbyeSent && send.goodbyeAffordable()) {
                goodbyeSent = true;
                FabricException failed = send.sendGoodbye();
                if (failed != null) {
                    failLocked(failed);
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
                beginDisconnectLocked(null);
            }
        }
        if (state == ChannelState.CLOSING && now - closeDeadline > 0) {
            String unsent = send.outboxEmpty() ? "no credit came back for the goodbye"
                    : send.outboxSize() + " frames unsent";
            LOG.warn("channel {} ({}): orderly close timed out after closeTimeout ({} ms), {}; disconnecting", id,
                    describe(remote), config.closeTimeout().toMillis(), unsent);
            beginDisconnectLocked(send.outboxEmpty() ? null : new FabricException("channel " + id
                    + ": close timed out with " + send.outboxSize() + " frames unsent to " + describe(remote)));
        }
    }

    private void failLocked(FabricException why) {
        if (state.tearingDown()) {
            return;
        }
        if (receive.remoteClosing()) {
            why = new FabricException("channel " + id + ": peer " + describe(remote) + " closed the connection", why);
        } else {
            LOG.error("{}", why.getMessage());
        }
        beginDisconnectLocked(why);
    }

    private FabricException completionFailure(int status, String what) {
        return new FabricException("channel " + id + " (" + describe(remote) + "): " + what + " failed with "
                + WcStatus.name(status) + ": " + WcStatus.meaning(status));
    }

    /** Disconnect: every outstanding work request now completes (flushes); queued frames are dropped. */
    private void beginDisconnectLocked(FabricException why) {
        if (cause == null) {
            cause = why;
        }
        moveTo(ChannelState.DRAINING);
        drainDeadline = System.nanoTime() + DRAIN_TIMEOUT_NANOS;
        // queued frames are dropped only in releaseLocked: a partly posted one is still pointed at by sends
        send.stopWriting();
        if (qp != null) {
            qp.disconnect();
        }
    }

    /**
     * Every receive has come back, and every signaled send (an unsignaled one that already succeeded produces no
     * completion, but is retired by the signaled one after it or is done anyway).
     */
    private boolean isDrainedLocked(long now) {
        if (causeIsFlush && now - flushGraceDeadline < 0) {
            return false;
        }
        if (qp == null || (receivesOutstanding <= 0 && send.signaledOutstanding() == 0 && sharedReceivesSettled())) {
            return true;
        }
        if (now - drainDeadline > 0) {
            drainTimedOut = true;
            LOG.warn("channel {} ({}): {} receives and {} signaled sends did not complete after disconnect; "
                    + "destroying the queue pair anyway", id, describe(remote), receivesOutstanding,
                    send.signaledOutstanding());
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
    private void finishTeardownLocked() {
        settlePeerDisconnectLocked();
        moveTo(ChannelState.CLOSED);
        if (qp != null) {
            qp.close();
        }
        releaseLocked();
        LOG.debug("channel {} closed{}", id, cause == null ? "" : ": " + cause.getMessage());
    }

    /** On the loop thread (or before any loop knew the channel): the queue pair is gone, nothing points in. */
    private void releaseLocked() {
        send.releaseAll();
        receive.release();
        if (shared.isMember()) {
            shared.release(); // after the queue pair is destroyed: no SEND can take one now
            if (loop != null) {
                loop.unmapQueuePair(qpNumber, this);
            }
        }
        if (memory != null) {
            memory.close();
            memory = null;
        }
        if (!queuePairPending) {
            releaseDeferredSlotLocked();
        }
    }

    /**
     * The fabric is creating a queue pair on this channel's loop's completion queue (and shared receive queue) from
     * the spec it got, or has not yet said what became of it: until it hands the queue pair over ({@link #attach}) or
     * the connect or accept has failed ({@link #queuePairSetupEnded}), the loop slot stays taken even if the channel
     * is released meanwhile, so that the loop's queues are not destroyed under a queue pair still using them.
     */
    private void queuePairPending(boolean pending) {
        lock.lock();
        try {
            queuePairPending = pending;
        } finally {
            lock.unlock();
        }
    }

    /** The transport's connect or accept failed: a queue pair the fabric was creating is gone, or ours to abort. */
    void queuePairSetupEnded() {
        lock.lock();
        try {
            queuePairPending = false;
            if (state == ChannelState.CLOSED) {
                releaseDeferredSlotLocked();
            }
        } finally {
            lock.unlock();
        }
    }

    private void releaseDeferredSlotLocked() {
        if (loop != null && index >= 0) {
            loop.unregister(index, reservedEntries);
            index = -1;
        }
    }

    private FabricException closedException() {
        FabricException c = cause;
        return new FabricException("channel " + id + " to " + describe(remote) + " is closed"
                + (c == null ? "" : ": " + c.getMessage()), c);
    }

    static String describe(InetSocketAddress a) {
        return RdmaTransport.describe(a);
    }
}
