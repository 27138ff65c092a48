package dev.artemisrdma.transport;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One connection: credits, fragmentation, the send ring and the receive slots over one RC queue pair.
 *
 * <p>Threads. Writers post from their own threads under {@link #lock} (the fabric forbids concurrent posting on
 * one queue pair; the completion loop posts reposts and credit frames under the same lock). Receive processing
 * runs on the completion loop thread and touches receive-only state without the lock; what it learns (credits
 * granted, sends completed, receives to repost) is applied under the lock once per batch in {@link #endOfBatch}.
 * Handler callbacks are made on the loop thread and never under the lock, so a handler may write, and a writer
 * holding its own locks cannot deadlock against a callback.
 *
 * <p>Memory. One registration per connection holds the receive slots ({@code slots * slotSize}) followed by the
 * send headers ({@link SendRing#HEADER_STRIDE} per send ring slot). It is released only after the queue pair is
 * destroyed, and every send buffer stays with the ring until its work request is known complete.
 */
final class RdmaChannelImpl implements RdmaChannel {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaChannelImpl.class);
    static final long RECV_BIT = 1L << 31;
    private static final long DRAIN_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(5);
    /** How long a teardown caused by flushes alone waits for the disconnect event that explains them. */
    private static final long FLUSH_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(200);
    /** Reassembly buffers above this are dropped after delivery instead of kept for the next frame. */
    private static final int RETAIN_REASSEMBLY_BYTES = 4 << 20;

    enum State { CONNECTING, OPEN, CLOSING, DRAINING, CLOSED }

    private final RdmaTransport transport;
    private final TransportConfig config;
    private final String id;
    private final InetSocketAddress remote;
    private final int slots;
    private final int slotSize;
    private final ReentrantLock lock = new ReentrantLock();
    private final CountDownLatch closed = new CountDownLatch(1);
    private final CreditWindow credits;
    private final Outbox outbox = new Outbox();
    private final Reassembler reassembler;
    private final RecvList repost;
    /**
     * Consumed slots are reposted in groups of this many: one ibv_post_recv per group instead of one per frame. Safe
     * for credits, which are returned only for receives actually reposted; at most repostBatch - 1 slots wait.
     */
    private final int repostBatch;

    private volatile ChannelHandler handler;
    private volatile InetSocketAddress local;
    private volatile BufferPool pool;
    private volatile State state = State.CONNECTING;
    private volatile boolean writable = true;
    private volatile int qpNumber = -1;

    // set up by bind() and attach(); guarded by lock afterwards
    private CompletionLoop loop;
    private volatile int index = -1; // read by the loop thread to build work request ids
    private int reservedEntries;
    private RegisteredMemory memory;
    private ByteBuffer headerView;
    private ByteBuffer slotView;
    private int headerBase;
    private QueuePair qp;
    private SendRing ring;
    private SendList sendList;
    private PooledBuffer[] inlineDone;
    private int inlineCount;
    private int inlineLimit;

    // peer's side of the handshake; guarded by lock
    private int fragmentCapacity;
    private int peerMaxFrame;

    // guarded by lock
    private int receivesOutstanding;
    private FabricException cause;
    private boolean closeRequested;
    private boolean goodbyeSent;
    private boolean writableOwed;
    private boolean creditStalled;
    private boolean queueStalled;
    private long closeDeadline;
    private long drainDeadline;
    private boolean closedNotified;
    private boolean silent;
    private boolean causeIsFlush;
    private long flushGraceDeadline;

    // completion loop thread only
    boolean touched;
    private int batchReceived;
    private int batchGranted;
    private int batchSendSlot = -1;
    private boolean batchDelivered;
    private int batchFailureStatus = -1;
    private String batchFailureWhat;
    private boolean batchFlushed;
    private FabricException batchProtocolError;
    private volatile boolean remoteClosing;

    // counters: send side under lock, receive side on the loop thread; volatile so snapshots see them
    private volatile long framesSent;
    private volatile long bytesSent;
    private volatile long framesReceived;
    private volatile long bytesReceived;
    private volatile long creditFramesSent;
    private volatile long creditFramesReceived;
    private volatile long creditStalls;
    private volatile long sendQueueStalls;
    private volatile long sendsPosted;
    private volatile long signaledSends;
    private volatile long inlineSends;
    private volatile long postCalls;

    RdmaChannelImpl(RdmaTransport transport, TransportConfig config, String id, InetSocketAddress remote,
                    InetSocketAddress local, ChannelHandler handler) {
        this.transport = transport;
        this.config = config;
        this.id = id;
        this.remote = remote;
        this.local = local;
        this.handler = handler;
        // one receive beyond the credits offered: the reserve that lets the last credit always return credit
        this.slots = config.receiveSlots() + 1;
        this.slotSize = config.slotSize();
        this.repostBatch = Math.max(1, Math.min(16, config.receiveSlots() / 8));
        this.credits = new CreditWindow(effectiveCreditThreshold(config.receiveSlots(), config.creditThreshold(),
                repostBatch));
        this.reassembler = new Reassembler(config.maxFrameSize(), RETAIN_REASSEMBLY_BYTES);
        this.repost = new RecvList(slots);
    }

    /**
     * The credit threshold in force: at most {@code receiveSlots - repostBatch}. When a one-way sender is down to its
     * last credit (which it may spend only on a frame that returns credit) and has received everything, the receiver
     * holds the other receiveSlots credits: fewer than repostBatch as consumed slots awaiting their repost, the rest
     * reposted and owed. Unless the owed ones alone reach the threshold, no credit frame would ever go and both
     * sides would wait for each other forever.
     */
    static int effectiveCreditThreshold(int receiveSlots, int creditThreshold, int repostBatch) {
        return Math.max(1, Math.min(creditThreshold, receiveSlots - repostBatch));
    }

    /** What this side offers the peer in the handshake. */
    Handshake.Params localParams() {
        return new Handshake.Params(slotSize, slots, config.maxFrameSize());
    }

    /** Completion queue entries this connection can ever have outstanding: all receives plus the send budget. */
    int completionEntries() {
        return slots + config.sendQueueDepth();
    }

    void setHandler(ChannelHandler handler) {
        this.handler = handler;
    }

    /** The peer's handshake: how we must fragment for it and what it grants. */
    void setPeer(Handshake.Params peer) {
        lock.lock();
        try {
            fragmentCapacity = peer.slotSize() - FrameHeader.LENGTH;
            peerMaxFrame = peer.maxFrameSize();
            credits.grant(peer.initialCredits());
        } finally {
            lock.unlock();
        }
    }

    /** The connection-manager side of this channel: builds its queue pair and follows its events. */
    ConnectionSetup setup() {
        return new ConnectionSetup() {
            @Override
            public QueuePairSpec queuePairSpec(FabricDevice device) throws FabricException {
                bind(device);
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
                headerBase = slots * slotSize;
                memory = device.register(headerBase + config.sendQueueDepth() * SendRing.HEADER_STRIDE);
            } catch (FabricException | RuntimeException e) {
                loop.unregister(index, reservedEntries);
                loop = null;
                throw e;
            }
            headerView = memory.buffer().duplicate();
            slotView = memory.buffer().duplicate();
        } finally {
            lock.unlock();
        }
    }

    /** The queue pair exists: size the send side by what it really got, and post every receive. */
    private void attach(QueuePair queuePair) throws FabricException {
        lock.lock();
        try {
            qp = queuePair;
            qpNumber = queuePair.qpNumber();
            if (loop.failure() != null) {
                throw loop.failure(); // its queue outlives us only until we let go: the caller destroys qp
            }
            local = queuePair.localAddress();
            QueuePairCaps caps = queuePair.caps();
            if (caps.maxSendSge() < 2) {
                throw new FabricException("channel " + id + ": queue pair offers " + caps.maxSendSge()
                        + " send scatter-gather entries, the transport needs 2");
            }
            if (caps.maxRecvWr() < slots) {
                throw new FabricException("channel " + id + ": queue pair takes " + caps.maxRecvWr()
                        + " receives, the transport posts " + slots);
            }
            int budget = Math.min(config.sendQueueDepth(), caps.maxSendWr());
            ring = new SendRing(budget, config.signalInterval());
            sendList = new SendList(budget, 2 * budget);
            inlineDone = new PooledBuffer[budget];
            inlineLimit = config.maxInlineData() == 0 ? 0 : Math.min(config.maxInlineData(), caps.maxInlineData());
            RecvList initial = new RecvList(slots);
            for (int s = 0; s < slots; s++) {
                initial.add(recvWrId(s), memory.address() + (long) s * slotSize, slotSize, memory.lkey());
            }
            queuePair.postRecv(initial);
            receivesOutstanding = slots;
        } finally {
            lock.unlock();
        }
    }

    /** Active side: connect returned with the peer's accept. */
    void activeEstablished(Handshake.Params peer) {
        setPeer(peer);
        onEstablished();
    }

    private void onEstablished() {
        lock.lock();
        try {
            // the active side learns the peer's handshake when connect returns; an early event waits for it
            if (state == State.CONNECTING && fragmentCapacity > 0 && ring != null) {
                state = State.OPEN;
                LOG.debug("channel {} established: {} -> {}", id, describe(local), describe(remote));
                flushLocked();
                if (closeRequested) {
                    beginOrderlyCloseLocked();
                }
            }
        } finally {
            lock.unlock();
        }
    }

    private void onDisconnected(String reason) {
        lock.lock();
        try {
            if (state == State.CLOSED || (state == State.DRAINING && !causeIsFlush)) {
                return; // our own disconnect coming back, or already failing
            }
            FabricException why = null;
            if (!closeRequested || !outbox.isEmpty()) {
                why = new FabricException(remoteClosing
                        ? "channel " + id + ": peer " + describe(remote) + " closed the connection"
                        : "channel " + id + ": connection to " + describe(remote) + " lost: " + reason);
                LOG.info("{}", why.getMessage());
            }
            if (state == State.DRAINING) {
                cause = why; // the disconnect explains the flushes seen before it
                causeIsFlush = false;
                return;
            }
            beginDisconnectLocked(why);
        } finally {
            lock.unlock();
        }
    }

    /** Connect or accept failed before the channel was established: release what bind/attach took. */
    void abortUnestablished(FabricException why, boolean notifyHandler) {
        lock.lock();
        try {
            if (state == State.CLOSED) {
                return;
            }
            cause = why;
            state = State.CLOSED;
            if (qp != null) {
                qp.close(); // never established, or established and failed: the fabric flushed nothing we wait for
            }
            releaseLocked();
        } finally {
            lock.unlock();
        }
        if (!notifyHandler) {
            silent = true;
        }
        notifyClosed();
    }

    /**
     * Our completion loop died: nobody will poll this queue pair's completions, so there is nothing to drain. The
     * queue pair goes to error and is destroyed at once, then the handler hears the cause. One not attached yet is
     * refused by {@link #attach} instead.
     */
    void loopFailed(FabricException why) {
        lock.lock();
        try {
            if (qp == null || state == State.CLOSED) {
                return;
            }
            qp.disconnect();
        } finally {
            lock.unlock();
        }
        abortUnestablished(why, true);
    }

    /** Active side: the accept reply was not acceptable; tear the established connection down properly. */
    void failHandshake(FabricException why) {
        lock.lock();
        try {
            silent = true; // the caller of connect gets the exception; the handler never saw this channel
            state = State.OPEN;
            beginDisconnectLocked(why);
        } finally {
            lock.unlock();
        }
        awaitClosed();
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

    @Override
    public SendBuffer allocate(int capacity) {
        if (capacity > config.maxFrameSize()) {
            throw new IllegalArgumentException("channel " + id + ": buffer of " + capacity
                    + " bytes exceeds maxFrameSize " + config.maxFrameSize());
        }
        try {
            return pool.allocate(capacity);
        } catch (FabricException e) {
            throw new IllegalStateException("channel " + id + ": cannot allocate a send buffer: " + e.getMessage(), e);
        }
    }

    @Override
    public void write(SendBuffer buffer, boolean flush) throws FabricException {
        if (!(buffer instanceof PooledBuffer) || ((PooledBuffer) buffer).pool() != pool) {
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
        PooledBuffer frame = (PooledBuffer) buffer;
        int length = frame.buffer().position();
        if (!frame.transferToChannel()) {
            throw new IllegalStateException("channel " + id + ": send buffer was already written or released");
        }
        frame.frameLength = length;
        frame.sentOffset = 0;
        lock.lock();
        try {
            if (state.compareTo(State.OPEN) > 0 || closeRequested) {
                frame.releaseFromChannel();
                throw closedException();
            }
            int max = maxWritableLocked();
            if (length > max) {
                frame.releaseFromChannel();
                throw new IllegalArgumentException("channel " + id + ": frame of " + length
                        + " bytes exceeds the maximum frame size " + max);
            }
            outbox.add(frame);
            if (flush) {
                flushLocked();
            }
            updateWritabilityLocked();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void write(ByteBuffer frame, boolean flush) throws FabricException {
        int length = frame.remaining();
        if (length > config.maxFrameSize()) {
            throw new IllegalArgumentException("channel " + id + ": frame of " + length
                    + " bytes exceeds the maximum frame size " + config.maxFrameSize());
        }
        if (!isOpen()) {
            throw closedException();
        }
        PooledBuffer b = pool.allocate(length);
        b.buffer().put(frame.duplicate());
        write(b, flush);
    }

    @Override
    public void flush() throws FabricException {
        lock.lock();
        try {
            if (state.compareTo(State.CLOSING) > 0) {
                throw closedException();
            }
            flushLocked();
            updateWritabilityLocked();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public boolean isWritable() {
        return writable;
    }

    @Override
    public void setAutoRead(boolean autoRead) {
        lock.lock();
        try {
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
        return state.compareTo(State.OPEN) <= 0 && !closeRequested;
    }

    @Override
    public void close() {
        lock.lock();
        try {
            if (closeRequested || state.compareTo(State.CLOSING) >= 0) {
                // already closing
            } else {
                closeRequested = true;
                closeDeadline = System.nanoTime() + config.connectTimeout().toNanos();
                if (state == State.OPEN) {
                    beginOrderlyCloseLocked();
                }
                // CONNECTING: established() or the connect's failure completes the close
            }
        } finally {
            lock.unlock();
        }
        awaitClosed();
    }

    @Override
    public void forceClose() {
        lock.lock();
        try {
            closeRequested = true;
            if (state.compareTo(State.CLOSING) <= 0 && qp != null) {
                beginDisconnectLocked(null);
            }
        } finally {
            lock.unlock();
        }
        awaitClosed();
    }

    /** Blocks until released, unless called on the completion loop itself (which must go on to do the release). */
    private void awaitClosed() {
        CompletionLoop l = loop;
        if (l == null || l.isLoopThread() || state == State.CLOSED) {
            return;
        }
        try {
            long wait = config.connectTimeout().toNanos() + 2 * DRAIN_TIMEOUT_NANOS;
            if (!closed.await(wait, TimeUnit.NANOSECONDS)) {
                LOG.warn("channel {} ({}): close did not complete within {} ms", id, describe(remote),
                        TimeUnit.NANOSECONDS.toMillis(wait));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    boolean isClosed() {
        return state == State.CLOSED;
    }

    TransportStats stats() {
        return new TransportStats(framesSent, bytesSent, framesReceived, bytesReceived, creditFramesSent,
                creditFramesReceived, creditStalls, sendQueueStalls, sendsPosted, signaledSends, inlineSends,
                postCalls);
    }

    /**
     * Receive slots posted right now plus those waiting for their group's repost; with no traffic in flight that is
     * every slot: none may leak.
     */
    int receivesPostedOrAwaitingRepost() {
        lock.lock();
        try {
            return receivesOutstanding + repost.size();
        } finally {
            lock.unlock();
        }
    }

    /** Internal state for diagnostics: credits, queue and ring occupancy. */
    String debugState() {
        lock.lock();
        try {
            return id + " " + state + " credits=" + credits.sendCredits() + " owed=" + credits.owed()
                    + " returning=" + credits.isReturning() + " outbox=" + outbox.size() + "/" + outbox.queuedBytes()
                    + "B ring=" + (ring == null ? "-" : ring.outstanding() + "/" + ring.capacity() + " signaled="
                    + ring.signaledOutstanding()) + " receives=" + receivesOutstanding + " writable=" + writable;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public String toString() {
        return "RdmaChannel[" + id + " " + describe(local) + " -> " + describe(remote) + " " + state + "]";
    }

    // ---------------------------------------------------------------------------------------------- send path

    private int maxWritableLocked() {
        return peerMaxFrame > 0 ? Math.min(config.maxFrameSize(), peerMaxFrame) : config.maxFrameSize();
    }

    /**
     * Posts as much of the outbox as credits and send budget allow, as one list, then a credit frame if credit is
     * owed and no data carried it. Sends before the connection is established wait in the outbox.
     */
    private void flushLocked() {
        if (state != State.OPEN && state != State.CLOSING) {
            return;
        }
        sendList.clear();
        inlineCount = 0;
        while (!outbox.isEmpty()) {
            if (ring.free() == 0) {
                if (!queueStalled) {
                    queueStalled = true;
                    sendQueueStalls++;
                }
                break;
            }
            if (!credits.maySendData()) {
                if (!creditStalled) {
                    creditStalled = true;
                    creditStalls++;
                }
                break;
            }
            queueStalled = false;
            creditStalled = false;
            addFragmentLocked(outbox.peek());
        }
        if (ring.free() > 0 && credits.creditFrameDue()) {
            addCreditFrameLocked(0);
        }
        postLocked();
    }

    private void addFragmentLocked(PooledBuffer frame) {
        int offset = frame.sentOffset;
        int n = Math.min(frame.frameLength - offset, fragmentCapacity);
        boolean first = offset == 0;
        boolean last = offset + n == frame.frameLength;
        boolean inline = FrameHeader.LENGTH + n <= inlineLimit;
        // an inline frame of one fragment is copied by postSend, so its buffer can go straight back afterwards;
        // otherwise the last fragment's completion releases it (completions come in order)
        boolean releaseAfterPost = inline && first && last;
        int give = credits.spend();
        int slot = ring.nextSlot();
        boolean signal = ring.claim(releaseAfterPost || !last ? null : frame,
                credits.sendCredits() == 0 || (last && frame.isDedicated()));
        int header = headerBase + slot * SendRing.HEADER_STRIDE;
        FrameHeader.write(headerView, header, (first ? FrameHeader.FIRST : 0) | (last ? FrameHeader.LAST : 0),
                give, first ? frame.frameLength : offset);
        sendList.addSend(sendWrId(slot), (signal ? SendList.FLAG_SIGNALED : 0) | (inline ? SendList.FLAG_INLINE : 0));
        sendList.addSge(memory.address() + header, FrameHeader.LENGTH, memory.lkey());
        if (n > 0) {
            sendList.addSge(frame.address() + offset, n, frame.lkey());
        }
        countSend(signal, inline);
        frame.sentOffset = offset + n;
        outbox.posted(n);
        if (last) {
            outbox.remove();
            framesSent++;
            bytesSent += frame.frameLength;
            if (releaseAfterPost) {
                inlineDone[inlineCount++] = frame;
            }
        }
    }

    /** A header-only SEND returning credit; with {@link FrameHeader#CLOSE} it is the orderly goodbye. */
    private void addCreditFrameLocked(int extraFlags) {
        int give = credits.spend();
        int slot = ring.nextSlot();
        boolean signal = ring.claim(null, extraFlags != 0 || credits.sendCredits() == 0);
        int header = headerBase + slot * SendRing.HEADER_STRIDE;
        FrameHeader.write(headerView, header, FrameHeader.CREDIT | extraFlags, give, 0);
        boolean inline = FrameHeader.LENGTH <= inlineLimit;
        sendList.addSend(sendWrId(slot), (signal ? SendList.FLAG_SIGNALED : 0) | (inline ? SendList.FLAG_INLINE : 0));
        sendList.addSge(memory.address() + header, FrameHeader.LENGTH, memory.lkey());
        countSend(signal, inline);
        creditFramesSent++;
    }

    private void countSend(boolean signal, boolean inline) {
        sendsPosted++;
        if (signal) {
            signaledSends++;
        }
        if (inline) {
            inlineSends++;
        }
    }

    private void postLocked() {
        if (sendList.isEmpty()) {
            return;
        }
        try {
            qp.postSend(sendList);
            postCalls++;
        } catch (FabricException e) {
            // what was claimed stays in the ring: it is released once the queue pair is destroyed
            failLocked(new FabricException("channel " + id + " (" + describe(remote) + "): posting "
                    + sendList.size() + " sends failed: " + e.getMessage(), e));
        } finally {
            sendList.clear();
            for (int i = 0; i < inlineCount; i++) {
                inlineDone[i].releaseFromChannel();
                inlineDone[i] = null;
            }
            inlineCount = 0;
        }
    }

    private void updateWritabilityLocked() {
        long queued = outbox.queuedBytes();
        if (writable && queued > config.writeHighWaterMark()) {
            writable = false;
        } else if (!writable && queued <= config.writeHighWaterMark() / 2) {
            writable = true;
            writableOwed = true;
        }
    }

    // ------------------------------------------------------------------------------ completions (loop thread)

    int qpNumber() {
        return qpNumber;
    }

    long recvWrId(int slot) {
        return ((long) index << 32) | RECV_BIT | slot;
    }

    long sendWrId(int slot) {
        return ((long) index << 32) | slot;
    }

    void onReceiveCompletion(int slot, int status, int byteLength) {
        batchReceived++;
        if (status != WcStatus.SUCCESS) {
            noteFailure(status, "receive");
            return;
        }
        if (state.compareTo(State.CLOSING) > 0 || batchProtocolError != null) {
            return; // tearing down: the slot is not reposted, nothing more is delivered
        }
        int base = slot * slotSize;
        try {
            if (byteLength < FrameHeader.LENGTH) {
                throw new FabricException("protocol error: SEND of " + byteLength + " bytes has no frame header");
            }
            int flags = FrameHeader.flags(slotView, base);
            batchGranted += FrameHeader.credits(slotView, base);
            if ((flags & FrameHeader.CLOSE) != 0) {
                remoteClosing = true;
            }
            if ((flags & FrameHeader.CREDIT) != 0) {
                creditFramesReceived++;
            } else {
                slotView.limit(base + byteLength).position(base + FrameHeader.LENGTH);
                ByteBuffer frame = reassembler.accept(slotView, flags, FrameHeader.lengthOrOffset(slotView, base));
                if (frame != null) {
                    deliver(frame);
                }
                slotView.clear();
            }
            repost.add(recvWrId(slot), memory.address() + base, slotSize, memory.lkey());
        } catch (FabricException e) {
            batchProtocolError = new FabricException("channel " + id + " (" + describe(remote) + "): "
                    + e.getMessage());
        }
    }

    private void deliver(ByteBuffer frame) {
        framesReceived++;
        bytesReceived += frame.remaining();
        batchDelivered = true;
        try {
            handler.onFrame(this, frame);
        } catch (RuntimeException | Error e) {
            LOG.error("channel {} ({}): handler failed on a frame of {} bytes", id, describe(remote),
                    frame.limit(), e);
        } finally {
            reassembler.delivered();
        }
    }

    void onSendCompletion(int slot, int status) {
        batchSendSlot = slot;
        if (status != WcStatus.SUCCESS) {
            noteFailure(status, "send");
        }
    }

    private void noteFailure(int status, String what) {
        if (status == WcStatus.WR_FLUSH_ERR) {
            batchFlushed = true;
        } else if (batchFailureStatus < 0) {
            batchFailureStatus = status;
            batchFailureWhat = what;
        }
    }

    /** Applies one batch of completions: reposts, credits, retirements; posts what can go; fires callbacks. */
    void endOfBatch() {
        boolean delivered = batchDelivered;
        boolean notifyWritable;
        boolean notifyClosed;
        lock.lock();
        try {
            receivesOutstanding -= batchReceived;
            if (batchSendSlot >= 0) {
                ring.retireThrough(batchSendSlot);
            }
            credits.grant(batchGranted);
            if (batchProtocolError != null) {
                LOG.error("{}", batchProtocolError.getMessage());
                failLocked(batchProtocolError);
            } else if (batchFailureStatus >= 0) {
                failLocked(completionFailure(batchFailureStatus, batchFailureWhat));
            } else if (batchFlushed && state.compareTo(State.CLOSING) <= 0) {
                if (remoteClosing) {
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
            // CONNECTING counts too: the passive side hears "established" after the peer may already have sent,
            // and a slot not reposted would be a credit lost for good
            if (state.compareTo(State.CLOSING) > 0) {
                repost.clear(); // tearing down: consumed slots stay unposted
            } else if (repost.size() >= repostBatch) {
                try {
                    qp.postRecv(repost);
                    receivesOutstanding += repost.size();
                    credits.reposted(repost.size());
                } catch (FabricException e) {
                    failLocked(new FabricException("channel " + id + " (" + describe(remote)
                            + "): reposting receives failed: " + e.getMessage(), e));
                }
                repost.clear();
            }
            progressLocked();
            notifyWritable = takeWritableOwed();
            notifyClosed = state == State.CLOSED && !closedNotified;
        } finally {
            lock.unlock();
            batchReceived = 0;
            batchGranted = 0;
            batchSendSlot = -1;
            batchDelivered = false;
            batchFailureStatus = -1;
            batchFailureWhat = null;
            batchFlushed = false;
            batchProtocolError = null;
        }
        callbacks(delivered, notifyWritable, notifyClosed);
    }

    /** Periodic work of the loop: deadlines of closing channels, writability owed from other threads. */
    void tick(long now) {
        boolean notifyWritable;
        boolean notifyClosed;
        lock.lock();
        try {
            progressLocked(now);
            notifyWritable = takeWritableOwed();
            notifyClosed = state == State.CLOSED && !closedNotified;
        } finally {
            lock.unlock();
        }
        callbacks(false, notifyWritable, notifyClosed);
    }

    private boolean takeWritableOwed() {
        updateWritabilityLocked();
        boolean owed = writableOwed && state.compareTo(State.CLOSING) <= 0;
        writableOwed = false;
        return owed;
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
        lock.lock();
        try {
            if (closedNotified) {
                return;
            }
            closedNotified = true;
            why = cause;
        } finally {
            lock.unlock();
        }
        transport.channelClosed(this);
        closed.countDown();
        ChannelHandler h = handler;
        if (h != null && !silent) {
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
        if (state == State.OPEN) {
            flushLocked();
            if (state == State.OPEN) {
                return;
            }
        }
        progressLocked(System.nanoTime());
    }

    /** Moves the channel on: flushes, then advances closing or draining, whose deadlines use {@code now}. */
    private void progressLocked(long now) {
        if (state == State.OPEN || state == State.CLOSING) {
            flushLocked();
        }
        if (state == State.CLOSING) {
            progressOrderlyCloseLocked(now);
        }
        if (state == State.DRAINING && isDrainedLocked(now)) {
            finishTeardownLocked();
        }
    }

    private void beginOrderlyCloseLocked() {
        state = State.CLOSING;
        flushLocked();
        progressOrderlyCloseLocked(System.nanoTime());
    }

    /**
     * Closing: pending frames go first, then a signaled goodbye (which also retires any unsignaled sends before it);
     * once every send is known complete, disconnect. Bounded by connectTimeout.
     */
    private void progressOrderlyCloseLocked(long now) {
        if (outbox.isEmpty()) {
            if (!goodbyeSent && ring.free() > 0 && credits.sendCredits() >= 1) {
                goodbyeSent = true;
                sendList.clear();
                inlineCount = 0;
                addCreditFrameLocked(FrameHeader.CLOSE);
                postLocked();
            }
            // with no credit left, the send that spent the last one was signaled, so the ring still drains
            if ((goodbyeSent || credits.sendCredits() == 0) && ring.outstanding() == 0
                    && state == State.CLOSING) {
                beginDisconnectLocked(null);
            }
        }
        if (state == State.CLOSING && now - closeDeadline > 0) {
            LOG.warn("channel {} ({}): orderly close timed out with {} frames unsent; disconnecting", id,
                    describe(remote), outbox.size());
            beginDisconnectLocked(outbox.isEmpty() ? null : new FabricException("channel " + id
                    + ": close timed out with " + outbox.size() + " frames unsent to " + describe(remote)));
        }
    }

    private void failLocked(FabricException why) {
        if (state == State.DRAINING || state == State.CLOSED) {
            return;
        }
        if (remoteClosing) {
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
        state = State.DRAINING;
        drainDeadline = System.nanoTime() + DRAIN_TIMEOUT_NANOS;
        // queued frames are dropped only in releaseLocked: a partly posted one is still pointed at by sends
        writable = false;
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
        if (qp == null || (receivesOutstanding <= 0 && ring.signaledOutstanding() == 0)) {
            return true;
        }
        if (now - drainDeadline > 0) {
            LOG.warn("channel {} ({}): {} receives and {} signaled sends did not complete after disconnect; "
                    + "destroying the queue pair anyway", id, describe(remote), receivesOutstanding,
                    ring.signaledOutstanding());
            return true;
        }
        return false;
    }

    /** Destroy the queue pair, then release what its work requests pointed at, then the connection's memory. */
    private void finishTeardownLocked() {
        state = State.CLOSED;
        if (qp != null) {
            qp.close();
        }
        releaseLocked();
        LOG.debug("channel {} closed{}", id, cause == null ? "" : ": " + cause.getMessage());
    }

    private void releaseLocked() {
        state = State.CLOSED;
        writable = false;
        if (ring != null) {
            ring.retireAll();
        }
        outbox.releaseAll();
        if (memory != null) {
            memory.close();
            memory = null;
        }
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
