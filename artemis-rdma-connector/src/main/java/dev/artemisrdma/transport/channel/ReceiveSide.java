package dev.artemisrdma.transport.channel;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.Endpoints;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.fabric.RegisteredMemory;
import dev.artemisrdma.transport.fabric.WcStatus;
import dev.artemisrdma.transport.flow.CreditWindow;
import dev.artemisrdma.transport.flow.Reassembler;
import dev.artemisrdma.transport.flow.ReassemblyBudget;
import dev.artemisrdma.transport.stats.PublishedCounters;
import dev.artemisrdma.transport.wire.FrameHeader;
import dev.artemisrdma.transport.wire.ImmediateHeader;
import dev.artemisrdma.transport.wire.PackedFrames;
import dev.artemisrdma.transport.wire.WorkRequestIds;

/**
 * The receive side of one channel: its receive slots, reassembly of fragmented frames, delivery to the handler, and
 * what one batch of completions taught (credits granted, sends completed, failures, slots to repost).
 *
 * <p>Threads: owned by the channel's completion loop thread; nothing here is locked. The channel applies a batch
 * under its lock at the end of the batch, on the same thread, and releases the slots' memory only on this thread
 * too, so a completion is never processed against memory that is gone. Fields other threads read: the counters
 * (published with release stores, {@link PublishedCounters}) and {@link #remoteClosing()} (volatile).
 */
final class ReceiveSide {

    /** Delivers one whole frame to the handler (the channel catches what the handler throws). */
    interface FrameSink {
        void onFrame(ByteBuffer frame);
    }

    /** Reassembly buffers above this are dropped after delivery instead of kept for the next frame. */
    private static final int RETAIN_REASSEMBLY_BYTES = 4 << 20;

    private final String id;
    private final InetSocketAddress remote;
    private final int slotSize;
    private final int maxFrameSize;
    private final long reassemblyTimeoutNanos;
    private final Reassembler reassembler;
    private final RecvList repost;
    private final FrameSink sink;
    /** {@link #deliver} as the consumer packed frames go to, made once (a method reference per SEND would allocate). */
    private final Consumer<ByteBuffer> packedSink = this::deliver;

    /**
     * Set once under the channel's lock when the queue pair is prepared, before any receive is posted, then read by
     * the loop thread without it: volatile, so the loop sees them (a plain load on x86).
     */
    private volatile RegisteredMemory memory;
    private volatile ByteBuffer slotView;
    private volatile long wrIdBase;

    // one batch of completions
    private int batchReceived;
    private int batchArrived;
    private int batchSharedConsumed;
    private boolean batchCreditWanted;
    private int batchGranted;
    private int batchReleased;
    private int batchRecallKeep = -1;
    private int batchSendSlot = -1;
    private boolean batchDelivered;
    private int batchFailureStatus = -1;
    private String batchFailureWhat;
    private boolean batchFlushed;
    private FabricException batchProtocolError;
    private volatile boolean remoteClosing;

    // counted by the loop thread, read by monitoring: published, not fenced, per count (PublishedCounters)
    private static final int FRAMES_RECEIVED = 0;
    private static final int BYTES_RECEIVED = 1;
    private static final int CREDIT_FRAMES_RECEIVED = 2;
    private final PublishedCounters counts = new PublishedCounters(3);

    ReceiveSide(TransportConfig config, String id, InetSocketAddress remote, int slots, ReassemblyBudget budget,
                FrameSink sink) {
        this.id = id;
        this.remote = remote;
        this.slotSize = config.slotSize();
        this.maxFrameSize = config.maxFrameSize();
        this.reassemblyTimeoutNanos = config.reassemblyTimeout().toNanos();
        this.reassembler = new Reassembler(config.maxFrameSize(), RETAIN_REASSEMBLY_BYTES,
                config.maxReassemblyBytes(), budget);
        this.repost = new RecvList(slots);
        this.sink = sink;
    }

    /** The connection's memory holds the slots from offset 0; {@code channelIndex} tags our work request ids. */
    void attach(RegisteredMemory slots, int channelIndex) {
        slotView = slots.buffer().duplicate();
        wrIdBase = WorkRequestIds.receives(channelIndex);
        memory = slots;
    }

    long recvWrId(int slot) {
        return wrIdBase | slot;
    }

    /** Adds the receive of {@code slot} to {@code list}. */
    void addReceive(RecvList list, int slot) {
        RegisteredMemory m = memory;
        list.add(recvWrId(slot), m.address() + (long) slot * slotSize, slotSize, m.lkey());
    }

    /**
     * One receive completion, with the SEND's immediate data ({@link Completions#NO_IMMEDIATE} for none).
     * {@code tearingDown}: the slot is not reposted and, unless {@code deliverWhileDraining} (the peer disconnected:
     * what it sent before is still its data, as TCP delivers data before a FIN), nothing more is delivered.
     */
    void onReceive(int slot, int status, int byteLength, long immediate, boolean tearingDown,
                   boolean deliverWhileDraining) {
        batchReceived++;
        if (consume(this.slotView, slot * slotSize, status, byteLength, immediate, tearingDown,
                deliverWhileDraining)) {
            addReceive(repost, slot);
        }
    }

    /**
     * One receive completion from the completion loop's shared pool: the SEND is at {@code base} of the pool's
     * {@code poolView}; the pool reposts the slot whatever happens here, and decides what credit it gives back.
     */
    void onSharedReceive(ByteBuffer poolView, int base, int status, int byteLength, long immediate,
                         boolean tearingDown, boolean deliverWhileDraining) {
        batchSharedConsumed++;
        consume(poolView, base, status, byteLength, immediate, tearingDown, deliverWhileDraining);
    }

    /** Reads one SEND at {@code base} of {@code slotView}; true when its slot is to be reposted. */
    private boolean consume(ByteBuffer slotView, int base, int status, int byteLength, long immediate,
                            boolean tearingDown, boolean deliverWhileDraining) {
        if (status != WcStatus.SUCCESS) {
            noteFailure(status, "receive");
            return false;
        }
        batchArrived++;
        if ((tearingDown && !deliverWhileDraining) || batchProtocolError != null) {
            return false;
        }
        try {
            if (immediate != Completions.NO_IMMEDIATE) {
                consumeImmediateFragment(slotView, base, byteLength, (int) immediate);
                return true;
            }
            if (byteLength < FrameHeader.LENGTH) {
                throw new FabricException("protocol error: SEND of " + byteLength + " bytes has no frame header");
            }
            int flags = FrameHeader.flags(slotView, base);
            batchGranted += FrameHeader.credits(slotView, base);
            // a credit frame carries no data, so no frame waits behind it: a hint there (ours never sets one) would
            // let a peer ask for growth without sending anything the handler sees
            if ((flags & FrameHeader.CREDIT) == 0
                    && (FrameHeader.hints(slotView, base) & FrameHeader.HINT_CREDIT_WANTED) != 0) {
                batchCreditWanted = true;
            }
            if ((flags & FrameHeader.CLOSE) != 0) {
                remoteClosing = true;
            }
            if ((flags & FrameHeader.CREDIT) != 0) {
                counts.increment(CREDIT_FRAMES_RECEIVED);
                if ((flags & (FrameHeader.RECALL | FrameHeader.RELEASE)) != 0) {
                    recallOrRelease(flags, FrameHeader.lengthOrOffset(slotView, base));
                }
            } else if ((flags & FrameHeader.PACKED) != 0) {
                receivePacked(slotView, base, byteLength, flags);
            } else {
                reassemble(slotView, base + FrameHeader.LENGTH, base + byteLength, flags,
                        FrameHeader.lengthOrOffset(slotView, base));
            }
            return true;
        } catch (FabricException e) {
            slotView.clear();
            batchProtocolError = new FabricException("channel " + id + " (peer " + Endpoints.describe(remote)
                    + "): " + e.getMessage(), e);
            return false;
        }
    }

    /**
     * A credit frame that recalls our grants (the credits we may keep) or gives back the peer's (how many), each
     * bounded by the protocol's window before it is used: the release is checked against what the peer holds when the
     * batch is applied.
     */
    private void recallOrRelease(int flags, int count) throws FabricException {
        if ((flags & FrameHeader.RECALL) != 0) {
            if (count < 2 || count > CreditWindow.MAX_WINDOW) {
                throw new FabricException("protocol error: a recall lets us keep " + count + " credits, outside 2.."
                        + CreditWindow.MAX_WINDOW);
            }
            batchRecallKeep = count;
        }
        if ((flags & FrameHeader.RELEASE) != 0) {
            if (count < 1 || count > CreditWindow.MAX_WINDOW) {
                throw new FabricException("protocol error: a release gives back " + count + " credits, outside 1.."
                        + CreditWindow.MAX_WINDOW);
            }
            batchReleased += count;
        }
    }

    /**
     * A fragment whose header is the SEND's immediate data ({@link ImmediateHeader}), or a whole frame so sent: all of
     * the SEND is payload. A continuation's offset is what the reassembler holds (RC keeps a queue pair's SENDs in
     * order), so the reassembler's own checks (a first fragment before continuations, lengths that add up, the frame and memory
     * bounds) judge it as they judge in-band fragments.
     */
    private void consumeImmediateFragment(ByteBuffer slotView, int base, int byteLength, int immediate)
            throws FabricException {
        int flags;
        int lengthOrOffset;
        if (ImmediateHeader.isFirst(immediate)) {
            lengthOrOffset = ImmediateHeader.frameLength(immediate);
            flags = FrameHeader.FIRST | (byteLength == lengthOrOffset ? FrameHeader.LAST : 0);
        } else {
            ImmediateHeader.checkContinuation(immediate);
            batchGranted += ImmediateHeader.credits(immediate);
            if (ImmediateHeader.creditWanted(immediate)) {
                batchCreditWanted = true;
            }
            if (ImmediateHeader.isWhole(immediate)) {
                // a frame of one SEND: the reassembler refuses it inside a fragmented frame, as an in-band FIRST
                lengthOrOffset = byteLength;
                flags = FrameHeader.FIRST | FrameHeader.LAST;
            } else {
                lengthOrOffset = reassembler.received();
                flags = ImmediateHeader.isLast(immediate) ? FrameHeader.LAST : 0;
            }
        }
        reassemble(slotView, base, base + byteLength, flags, lengthOrOffset);
    }

    /** Hands the fragment at [from, to) of {@code slotView} to the reassembler and delivers a frame it completes. */
    private void reassemble(ByteBuffer slotView, int from, int to, int flags, int lengthOrOffset)
            throws FabricException {
        try {
            slotView.limit(to).position(from);
            ByteBuffer frame = reassembler.accept(slotView, flags, lengthOrOffset);
            if (frame != null) {
                deliver(frame);
            }
        } finally {
            slotView.clear();
        }
    }

    /** A SEND carrying several whole frames: all of it is validated against what arrived before any is delivered. */
    private void receivePacked(ByteBuffer slotView, int base, int byteLength, int flags) throws FabricException {
        if (flags != FrameHeader.PACKED) {
            throw new FabricException(String.format("protocol error: packed SEND with flags 0x%02x (PACKED stands "
                    + "alone)", flags));
        }
        if (reassembler.inProgress()) {
            throw new FabricException("protocol error: a packed SEND arrived inside a fragmented frame");
        }
        int count = FrameHeader.lengthOrOffset(slotView, base);
        int from = base + FrameHeader.LENGTH;
        int to = base + byteLength;
        PackedFrames.validate(slotView, from, to, count, maxFrameSize);
        PackedFrames.forEach(slotView, from, to, count, packedSink);
        slotView.clear();
    }

    private void deliver(ByteBuffer frame) {
        counts.increment(FRAMES_RECEIVED);
        counts.add(BYTES_RECEIVED, frame.remaining());
        batchDelivered = true;
        try {
            sink.onFrame(frame);
        } finally {
            reassembler.delivered();
        }
    }

    long framesReceived() {
        return counts.get(FRAMES_RECEIVED);
    }

    long bytesReceived() {
        return counts.get(BYTES_RECEIVED);
    }

    long creditFramesReceived() {
        return counts.get(CREDIT_FRAMES_RECEIVED);
    }

    void onSend(int slot, int status) {
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

    /**
     * A fragmented frame unfinished for longer than {@code reassemblyTimeout}, or one the transport's reassembly
     * budget condemned (it squatted on more than its share while another connection needed room): the failure to
     * fail the connection with, or null.
     */
    FabricException overdueFrame(long now) {
        if (!reassembler.inProgress()) {
            return null;
        }
        String condemned = reassembler.condemnation();
        if (condemned != null) {
            return new FabricException("channel " + id + " (peer " + Endpoints.describe(remote) + "): " + condemned
                    + ": the connection fails so that the others are served; raise reassemblyMemory if such frames "
                    + "are legitimate");
        }
        if (now - reassembler.startedAt() <= reassemblyTimeoutNanos) {
            return null;
        }
        return new FabricException("channel " + id + " (peer " + Endpoints.describe(remote) + "): a fragmented "
                + "frame stayed unfinished for more than reassemblyTimeout ("
                + TimeUnit.NANOSECONDS.toMillis(reassemblyTimeoutNanos) + " ms); raise reassemblyTimeout");
    }

    /** Whether a fragmented frame is being put back together (its reassemblyTimeout runs). */
    boolean reassembling() {
        return reassembler.inProgress();
    }

    /** Gives back every reassembly byte; the channel is gone. */
    void release() {
        reassembler.release();
        memory = null;
    }

    RecvList repost() {
        return repost;
    }

    int batchReceived() {
        return batchReceived;
    }

    /** SENDs of the peer that arrived in this batch (successful receives; flushes excluded). */
    int batchArrived() {
        return batchArrived;
    }

    /** Receives of the shared pool this batch consumed (each one a credit of ours the peer spent). */
    int batchSharedConsumed() {
        return batchSharedConsumed;
    }

    /** A SEND of this batch said the peer has frames waiting for credit. */
    boolean batchCreditWanted() {
        return batchCreditWanted;
    }

    int batchGranted() {
        return batchGranted;
    }

    /** Credits the peer gave back unspent in this batch ({@link FrameHeader#RELEASE}). */
    int batchReleased() {
        return batchReleased;
    }

    /** The credits a recall of this batch lets us keep ({@link FrameHeader#RECALL}); -1 when none came. */
    int batchRecallKeep() {
        return batchRecallKeep;
    }

    int batchSendSlot() {
        return batchSendSlot;
    }

    boolean batchDelivered() {
        return batchDelivered;
    }

    int batchFailureStatus() {
        return batchFailureStatus;
    }

    String batchFailureWhat() {
        return batchFailureWhat;
    }

    boolean batchFlushed() {
        return batchFlushed;
    }

    FabricException batchProtocolError() {
        return batchProtocolError;
    }

    /** Records a protocol error found while applying the batch (e.g. credits beyond the window). */
    void protocolError(FabricException e) {
        if (batchProtocolError == null) {
            batchProtocolError = new FabricException("channel " + id + " (peer " + Endpoints.describe(remote)
                    + "): " + e.getMessage(), e);
        }
    }

    void resetBatch() {
        batchReceived = 0;
        batchArrived = 0;
        batchSharedConsumed = 0;
        batchCreditWanted = false;
        batchGranted = 0;
        batchReleased = 0;
        batchRecallKeep = -1;
        batchSendSlot = -1;
        batchDelivered = false;
        batchFailureStatus = -1;
        batchFailureWhat = null;
        batchFlushed = false;
        batchProtocolError = null;
    }

    /** The peer sent its orderly goodbye. */
    boolean remoteClosing() {
        return remoteClosing;
    }

    int reassemblyHeldBytes() {
        return reassembler.heldBytes();
    }
}
