package dev.artemisrdma.transport.channel;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.DeviceLimits;
import dev.artemisrdma.transport.fabric.Endpoints;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.PartialPostException;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairCaps;
import dev.artemisrdma.transport.fabric.RegisteredMemory;
import dev.artemisrdma.transport.fabric.SendList;
import dev.artemisrdma.transport.flow.BufferPool;
import dev.artemisrdma.transport.flow.CreditWindow;
import dev.artemisrdma.transport.flow.PooledBuffer;
import dev.artemisrdma.transport.stats.PublishedCounters;
import dev.artemisrdma.transport.wire.FrameHeader;
import dev.artemisrdma.transport.wire.Handshake;
import dev.artemisrdma.transport.wire.ImmediateHeader;
import dev.artemisrdma.transport.wire.PackedFrames;
import dev.artemisrdma.transport.wire.WorkRequestIds;

/**
 * The send side of one channel: the outbox of written frames, fragmentation into the peer's receive slots, packing
 * of queued small frames into one SEND ({@link PackedFrames}), the send credits, the send ring and the posting of
 * SEND work requests.
 *
 * <p>Threads: guarded by the channel's lock, always. Writers call in from their own threads, the completion loop
 * calls in (retirements, credits granted, credit frames) from {@link LoopSide#endOfBatch}; both hold the lock,
 * which is also what keeps posts on the queue pair from running concurrently. Only {@link #isWritable()} and the
 * counters ({@link #counts}, published with release stores) are read without it.
 *
 * <p>Outstanding work is exact: after a post that failed part-way ({@link PartialPostException}), the requests that
 * never reached the queue pair are taken back out of the ring, so teardown waits only for what will complete.
 */
final class SendSide {

    private final TransportConfig config;
    private final String id;
    private final InetSocketAddress remote;
    private final CreditWindow credits;
    private final Outbox outbox = new Outbox();
    /** Frames whose last fragment never got posted while earlier ones did: their memory waits for teardown. */
    private final List<PooledBuffer> heldUntilTeardown = new ArrayList<>();

    private QueuePair qp;
    private BufferPool pool;
    private ByteBuffer headerView;
    private int headerBase;
    /**
     * Where the headers' memory starts, and its key: read once at attach, so that a SEND's entry costs no chain of
     * loads through the registration's wrappers (the accounting device's, the fabric's) on every post.
     */
    private long headerMemoryAddress;
    private int headerMemoryLkey;
    private long wrIdBase;
    private SendRing ring;
    private SendList sendList;
    private PooledBuffer[] inlineDone;
    private int inlineCount;
    private int inlineLimit;

    // the peer's side of the handshake
    private int fragmentCapacity;
    /** The peer's whole slot: a fragment's payload when its header goes in immediate data. */
    private int slotCapacity;
    /** The peer reads fragments whose header is the SEND's immediate data ({@link ImmediateHeader}). */
    private boolean immediateFragments;
    /** The peer reads whole frames whose header, credits included, is the immediate data. */
    private boolean immediateWhole;
    /** The port's active MTU in bytes (0: unknown), to keep a frame's header from costing a packet of its own. */
    private int pathMtu;
    /** Our device may send immediate data (not an iWARP one); known from {@link #attach}. */
    private boolean deviceSendsImmediate;
    private int peerMaxFrame;
    private boolean packing;
    /** The peer grants from a shared pool: its window may grow when we tell it frames are waiting. */
    private boolean creditGrows;
    /** The peer gives unused credits back when our shared pool recalls them. */
    private boolean peerAnswersRecall;
    /** A recall to send: the credits the peer may keep; -1 for none. */
    private int recallKeep = -1;
    /** The peer recalled its grants: the credits we may keep; -1 for none. */
    private int releaseKeep = -1;

    private volatile boolean writable = true;
    private boolean writableOwed;
    /** Data SENDs posted when the loop's tick last saw this channel unwritable; -1: it was writable. */
    private long stallMark = -1;
    /** When that tick saw them, or saw the stall begin (see {@link #unwritableStallNanos}). */
    private long stallSince;
    private boolean creditStalled;
    private boolean queueStalled;

    // the send side's counters of TransportStats, by number in `counts`; written under the channel's lock
    static final int FRAMES_SENT = 0;
    static final int BYTES_SENT = 1;
    static final int CREDIT_FRAMES_SENT = 2;
    static final int CREDIT_STALLS = 3;
    static final int SEND_QUEUE_STALLS = 4;
    static final int SENDS_POSTED = 5;
    static final int SIGNALED_SENDS = 6;
    static final int INLINE_SENDS = 7;
    static final int POST_CALLS = 8;
    static final int FRAMES_PACKED = 9;
    static final int PACKED_SENDS = 10;
    /** Writer flushes left to the completion loop, which was handling a batch (WritePath#writerFlushLocked). */
    static final int FLUSHES_TO_LOOP = 11;
    /** Fragments sent with their header in immediate data (a whole slot of payload each). */
    static final int IMMEDIATE_SENDS = 12;
    /** Read by monitoring without the lock: published, not fenced, per count ({@link PublishedCounters}). */
    final PublishedCounters counts = new PublishedCounters(13);

    SendSide(TransportConfig config, String id, InetSocketAddress remote, int creditThreshold) {
        this.config = config;
        this.id = id;
        this.remote = remote;
        this.credits = new CreditWindow(creditThreshold);
    }

    CreditWindow credits() {
        return credits;
    }

    /**
     * The queue pair exists: size the ring by the send budget it really got. Send headers live in {@code memory}
     * from {@code headerBase}, one {@link TransportConfig#SEND_HEADER_STRIDE} per ring slot.
     */
    void attach(QueuePair queuePair, QueuePairCaps caps, RegisteredMemory memory, int headerBase, int channelIndex,
                BufferPool pool) {
        this.qp = queuePair;
        this.headerMemoryAddress = memory.address();
        this.headerMemoryLkey = memory.lkey();
        this.pool = pool;
        this.headerView = memory.buffer().duplicate();
        this.headerBase = headerBase;
        this.wrIdBase = WorkRequestIds.sends(channelIndex);
        int budget = Math.min(config.sendQueueDepth(), caps.maxSendWr());
        ring = new SendRing(budget, config.signalInterval());
        sendList = new SendList(budget, 2 * budget);
        inlineDone = new PooledBuffer[budget];
        // the queue pair's own figure: the transport fitted the ask to the device, which may have granted more
        inlineLimit = Math.min(config.inlineWanted(), caps.maxInlineData());
        deviceSendsImmediate = queuePair.device().supportsImmediateData();
        DeviceLimits limits = queuePair.device().limits();
        pathMtu = limits == null ? 0 : limits.activeMtu();
    }

    /**
     * The peer's handshake: how we must fragment for it and what it grants.
     *
     * @throws FabricException when its credits break the window's bound (a protocol error)
     */
    void peer(Handshake.Params peer) throws FabricException {
        fragmentCapacity = peer.slotSize() - FrameHeader.LENGTH;
        slotCapacity = peer.slotSize();
        immediateFragments = peer.readsImmediateFragments();
        immediateWhole = peer.readsImmediateWhole();
        peerMaxFrame = peer.maxFrameSize();
        packing = peer.readsPacked();
        creditGrows = peer.maxCredits() > peer.initialCredits();
        peerAnswersRecall = peer.answersCreditRecall();
        credits.limit(peer.maxCredits());
        credits.grant(peer.initialCredits());
    }

    /**
     * Our shared pool wants receives back: the next post asks the peer to give back what it holds beyond
     * {@code keep}. False when the peer does not answer recalls (a peer from before them).
     */
    boolean queueRecall(int keep) {
        if (!peerAnswersRecall) {
            return false;
        }
        recallKeep = keep;
        return true;
    }

    /** The peer recalled its grants: the next post gives back what we hold beyond {@code keep}, if we are idle. */
    void recalled(int keep) {
        releaseKeep = keep;
    }

    /** Both the queue pair and the peer's handshake are known: frames can go. */
    boolean isReady() {
        return fragmentCapacity > 0 && ring != null;
    }

    int maxWritable() {
        return peerMaxFrame > 0 ? Math.min(config.maxFrameSize(), peerMaxFrame) : config.maxFrameSize();
    }

    void enqueue(PooledBuffer frame) {
        outbox.add(frame);
    }

    /** Bytes written and not known sent: queued in the outbox, or in SENDs not yet known complete. */
    long queuedBytes() {
        return outbox.queuedBytes() + (ring == null ? 0 : ring.bytesOutstanding());
    }

    /**
     * Why a frame of {@code length} more bytes may not be queued: it would take this connection's queued bytes past
     * maxQueuedBytesPerConnection, so its writer ignores isWritable toward a peer that takes nothing (the connection
     * fails, not the next one to ask for send memory); null when it fits.
     */
    FabricException overQueueCap(int length) {
        long queued = queuedBytes();
        long cap = config.maxQueuedBytesPerConnection();
        if (length <= cap - queued) {
            return null;
        }
        return new FabricException("channel " + id + " (peer " + Endpoints.describe(remote) + "): a frame of "
                + length + " bytes on top of " + queued + " bytes queued unsent exceeds maxQueuedBytesPerConnection ("
                + cap + " bytes; raise it, or have the writer honour isWritable): the writer ignored isWritable while "
                + "the peer took nothing; this connection fails");
    }

    /**
     * How long, as of the loop's tick at {@code now}, the channel has been unwritable with frames ready to go and no
     * data SEND posted: the peer grants no credit or acknowledges nothing. 0 while writable, flushed frames absent,
     * or data leaving (a slow peer that takes frames is no stall). Loop thread, under the lock.
     */
    long unwritableStallNanos(long now) {
        if (writable || outbox.flushable() == 0) {
            stallMark = -1;
            return 0;
        }
        long progress = counts.get(SENDS_POSTED) - counts.get(CREDIT_FRAMES_SENT);
        if (progress != stallMark) {
            stallMark = progress;
            stallSince = now;
            return 0;
        }
        return now - stallSince;
    }

    /** The writer flushed: everything it queued may go (see {@link Outbox}). */
    void markFlushed() {
        outbox.markFlushed();
    }

    /**
     * Posts as much of the outbox's flushed frames as credits and send budget allow, as one list, then a credit frame
     * if credit is owed and no data carried it.
     *
     * <p>A writer's flush of several frames ({@code writer}) is held back while a signaled SEND is in flight: its
     * completion makes the completion loop flush ({@link LoopSide#endOfBatch}), which posts them then, packed
     * with whatever the writer queued meanwhile, as one list. So a writer that flushes often cannot turn a stream into
     * one system call per flush (on rxe each post does the packets' work in the caller: the lab's 1 KiB stream ran at
     * half speed that way). No timer: the completion comes one round trip after the SEND; and a lone frame (the only
     * one queued) always leaves at once. A writer's post of several frames asks a completion for its last SEND, so
     * the flushes that follow it have one to wait behind.
     *
     * @return why posting failed (the channel must fail), or null
     */
    FabricException flush(boolean writer) {
        boolean streaming = writer && outbox.flushable() > 1;
        if (streaming && ring.signaledOutstanding() > 0) {
            return null;
        }
        return postOutbox(streaming);
    }

    /** As {@link #flush(boolean)} for the completion loop and the channel's own progress: posts what can go. */
    FabricException flush() {
        return postOutbox(false);
    }

    /** Builds the list of what can go and posts it; {@code signalLast}: its last SEND asks a completion. */
    private FabricException postOutbox(boolean signalLast) {
        sendList.clear();
        inlineCount = 0;
        while (outbox.flushable() > 0) {
            if (ring.free() == 0) {
                if (!queueStalled) {
                    queueStalled = true;
                    counts.increment(SEND_QUEUE_STALLS);
                }
                break;
            }
            if (!credits.maySendData()) {
                if (!creditStalled) {
                    creditStalled = true;
                    counts.increment(CREDIT_STALLS);
                }
                break;
            }
            queueStalled = false;
            creditStalled = false;
            if (!addPacked()) {
                addFragment(outbox.peek());
            }
        }
        if (releaseKeep >= 0 || recallKeep >= 0) {
            recallOrRelease(); // rare: a pool under pressure
        }
        if (ring.free() > 0 && credits.creditFrameDue()) {
            addCreditFrame(0, 0);
        }
        if (signalLast && !sendList.isEmpty() && ring.signalLast()) {
            sendList.signalLast();
            counts.increment(SIGNALED_SENDS);
        }
        return post();
    }

    /** Can the orderly goodbye go now? */
    boolean goodbyeAffordable() {
        return ring.free() > 0 && credits.sendCredits() >= 1;
    }

    /** Posts the orderly goodbye: a signaled credit frame with CLOSE. */
    FabricException sendGoodbye() {
        sendList.clear();
        inlineCount = 0;
        addCreditFrame(FrameHeader.CLOSE, 0);
        return post();
    }

    /** Sends a recall our pool asked for, or answers one the peer sent. */
    private void recallOrRelease() {
        if (releaseKeep >= 0) {
            releaseRecalled();
        }
        if (recallKeep >= 0 && ring.free() > 0 && (credits.sendCredits() > 1 || credits.mayReturnCredit())) {
            addCreditFrame(FrameHeader.RECALL, recallKeep);
            recallKeep = -1;
        }
    }

    /**
     * Answers a recall: with no flushed frame waiting, gives back in one credit frame the credits beyond what the
     * recall lets us keep (that frame spends one of them). A sender whose flushed frames wait is using its window and
     * keeps it; frames written and not yet flushed do not count (their writer may take its time: a window held for
     * them would stay idle meanwhile, and the pool would judge it a hog). It grows again the usual way after giving
     * it back.
     */
    private void releaseRecalled() {
        int keep = releaseKeep;
        releaseKeep = -1;
        int surplus = credits.sendCredits() - 1 - keep;
        if (surplus < 1 || outbox.flushable() > 0 || ring.free() == 0) {
            return;
        }
        addCreditFrame(FrameHeader.RELEASE, surplus);
        credits.release(surplus);
    }

    /**
     * The next fragment of the head frame. A frame larger than a slot's room behind an in-band header goes, to a peer
     * that reads them, in fragments of a whole slot with the header in immediate data; its first fragment returns no
     * credit, so it goes that way only while we hold more than the credit it spends (else in band: the last credit
     * must return credit, and the fragments after it are immediate ones all the same). A frame of one SEND goes with
     * its header in the immediate data when its in-band header would cost a packet of its own
     * ({@link #headerCostsAPacket}) or a SEND of its own (a frame of a whole slot): as a whole frame that returns
     * credit, to a peer that reads those (then on any credit), else as a first fragment that is also the last (on the
     * same condition as a fragmented frame's first).
     */
    private void addFragment(PooledBuffer frame) {
        int offset = frame.sentOffset();
        boolean first = offset == 0;
        boolean fragmented = frame.frameLength() > fragmentCapacity;
        // with its header in band the frame would take a SEND more (fragmented) or a packet more
        boolean inBandCosts = fragmented || headerCostsAPacket(frame.frameLength());
        boolean whole = first && immediateWhole && inBandCosts && frame.frameLength() <= slotCapacity;
        boolean immediate = deviceSendsImmediate && (whole
                || immediateFragments && (!first || credits.sendCredits() > 1 && inBandCosts));
        int n = Math.min(frame.frameLength() - offset, immediate ? slotCapacity : fragmentCapacity);
        boolean last = offset + n == frame.frameLength();
        addDataSend(frame, offset, n, last, (first ? FrameHeader.FIRST : 0) | (last ? FrameHeader.LAST : 0),
                first ? frame.frameLength() : offset, !last || outbox.size() > 1, immediate);
        frame.sentTo(offset + n);
        outbox.posted(n);
        if (last) {
            outbox.remove();
            counts.increment(FRAMES_SENT);
            counts.add(BYTES_SENT, frame.frameLength());
        }
    }

    /**
     * Whether the 8-byte in-band header makes a SEND of {@code frameLength} payload bytes one packet longer at the
     * port's MTU: 1 KiB at RoCE MTU 1024 (ordinary 1500-byte Ethernet) is one packet, 1,032 bytes are two, and on
     * the wire that second packet costs a round trip about what the first does (ib_send_lat's 1 KiB SEND is one). Such a
     * frame goes with its header in the immediate data, where the peer reads it: as a whole frame that returns
     * credit (handshake feature 4), or as a first fragment that is the whole frame (feature 2, which every build with
     * immediate fragments states: their receivers take a first fragment as the whole frame when the SEND is that
     * long), whose price is that it returns no credit, so what we owe rides on a later SEND (or a credit frame at
     * creditThreshold).
     * An unknown MTU (0) never changes anything.
     */
    private boolean headerCostsAPacket(int frameLength) {
        if (pathMtu <= 0 || frameLength <= 0) {
            return false;
        }
        int tail = frameLength % pathMtu;
        return tail == 0 || tail > pathMtu - FrameHeader.LENGTH;
    }

    /**
     * Packs the small frames at the head of the outbox into one SEND, if at least two of them fit in the peer's
     * slot: they queued (behind a credit wait, a full ring, or an unflushed write), so packing delays none of them,
     * and a lone frame never gets here. A frame being fragmented, or too large to pack, ends the pack (order holds:
     * it goes next, on its own). The frames are copied and released at once; the pack buffer goes back to the pool
     * when its SEND completes, like any frame.
     *
     * @return false when nothing was packed (the head goes as usual)
     */
    private boolean addPacked() {
        if (!packing) {
            return false;
        }
        int count = 0;
        int bytes = 0;
        for (int i = 0, n = outbox.flushable(); i < n; i++) {
            PooledBuffer f = outbox.get(i);
            if (f.sentOffset() != 0 || f.frameLength() > PackedFrames.MAX_PACKED_FRAME
                    || bytes + PackedFrames.entryLength(f.frameLength()) > fragmentCapacity) {
                break;
            }
            bytes += PackedFrames.entryLength(f.frameLength());
            count++;
        }
        if (count < 2) {
            return false;
        }
        PooledBuffer pack = allocatePack(bytes);
        if (pack == null) {
            return false;
        }
        int at = 0;
        for (int i = 0; i < count; i++) {
            PooledBuffer f = outbox.remove();
            at = PackedFrames.put(pack.buffer(), at, f.buffer(), f.frameLength());
            outbox.posted(f.frameLength());
            counts.increment(FRAMES_SENT);
            counts.add(BYTES_SENT, f.frameLength());
            f.releaseFromChannel(); // copied: no work request will ever point into it
        }
        pack.startFrame(bytes);
        addDataSend(pack, 0, bytes, true, FrameHeader.PACKED, count, !outbox.isEmpty(), false);
        counts.add(FRAMES_PACKED, count);
        counts.increment(PACKED_SENDS);
        return true;
    }

    /**
     * A registered buffer for a pack, owned by the channel, or null when the pool cannot give one (then frames go
     * one per SEND: packing is an optimisation, never a reason to fail). Slabs are registered rarely (pool growth).
     */
    private PooledBuffer allocatePack(int bytes) {
        try {
            return pool.allocateForChannel(bytes);
        } catch (FabricException | RuntimeException e) {
            return null;
        }
    }

    /**
     * One data SEND: bytes [offset, offset + n) of {@code buffer} behind a header of {@code flags} and
     * {@code lengthOrOffset}, or ({@code viaImmediate}) with that header as the SEND's immediate data
     * ({@link ImmediateHeader}). With {@code last} the buffer is done after this SEND: released when it completes
     * (completions come in order), or right after the post when it went inline whole (postSend copied it).
     */
    private void addDataSend(PooledBuffer buffer, int offset, int n, boolean last, int flags, int lengthOrOffset,
                             boolean moreQueued, boolean viaImmediate) {
        boolean inline = (viaImmediate ? 0 : FrameHeader.LENGTH) + n <= inlineLimit;
        boolean releaseAfterPost = inline && offset == 0 && last;
        boolean whole = viaImmediate && immediateWhole
                && (flags & (FrameHeader.FIRST | FrameHeader.LAST)) == (FrameHeader.FIRST | FrameHeader.LAST);
        boolean immediateFirst = viaImmediate && !whole && (flags & FrameHeader.FIRST) != 0;
        int give = immediateFirst ? credits.spendReturningNone() : credits.spend();
        int slot = ring.nextSlot();
        boolean signal = ring.claim(releaseAfterPost || !last ? null : buffer,
                credits.sendCredits() == 0 || (last && buffer.isDedicated()), n);
        // frames queued behind this one: a pool-granting peer hears that our window is too small for the stream. Not
        // when a SEND merely empties the window or frames waited for credit: a JMS connection's set-up bursts do that
        // too, and with every one of 1,000 connections holding a grown window the shared pools filled (scale-bench)
        int hints = creditGrows && moreQueued ? FrameHeader.HINT_CREDIT_WANTED : 0;
        sendList.addSend(wrIdBase | slot, (signal ? SendList.FLAG_SIGNALED : 0) | (inline ? SendList.FLAG_INLINE : 0));
        if (viaImmediate) {
            sendList.withImmediate(whole ? ImmediateHeader.whole(hints, give)
                    : immediateFirst ? ImmediateHeader.first(lengthOrOffset)
                    : ImmediateHeader.continuation(last, hints, give));
            sendList.addSge(buffer.address() + offset, n, buffer.lkey());
            counts.increment(IMMEDIATE_SENDS);
        } else if (offset == 0) {
            // from the buffer's first byte: the header goes into the buffer's headroom, one entry for both, inline or
            // not (an inline SEND's entries are copied one by one at the post: one entry is the provider's shortest
            // loop, as ib_send_lat's single entry). Later fragments keep theirs in the ring: the bytes before them
            // belong to the fragment before, which may still be in flight.
            ByteBuffer room = buffer.headroom();
            FrameHeader.write(room, room.capacity() - FrameHeader.LENGTH, flags, hints, give, lengthOrOffset);
            sendList.addSge(buffer.address() - FrameHeader.LENGTH, FrameHeader.LENGTH + n, buffer.lkey());
        } else {
            int header = headerBase + slot * TransportConfig.SEND_HEADER_STRIDE;
            FrameHeader.write(headerView, header, flags, hints, give, lengthOrOffset);
            sendList.addSge(headerMemoryAddress + header, FrameHeader.LENGTH, headerMemoryLkey);
            if (n > 0) {
                sendList.addSge(buffer.address() + offset, n, buffer.lkey());
            }
        }
        countSend(signal, inline);
        if (releaseAfterPost) {
            inlineDone[inlineCount++] = buffer;
        }
    }

    /**
     * A header-only SEND returning credit; with {@link FrameHeader#CLOSE} it is the orderly goodbye, with
     * {@link FrameHeader#RECALL} or {@link FrameHeader#RELEASE} {@code count} says how many credits.
     */
    private void addCreditFrame(int extraFlags, int count) {
        int give = credits.spend();
        int slot = ring.nextSlot();
        boolean signal = ring.claim(null, (extraFlags & FrameHeader.CLOSE) != 0 || credits.sendCredits() == 0);
        int header = headerBase + slot * TransportConfig.SEND_HEADER_STRIDE;
        FrameHeader.write(headerView, header, FrameHeader.CREDIT | extraFlags, give, count);
        boolean inline = FrameHeader.LENGTH <= inlineLimit;
        sendList.addSend(wrIdBase | slot, (signal ? SendList.FLAG_SIGNALED : 0) | (inline ? SendList.FLAG_INLINE : 0));
        sendList.addSge(headerMemoryAddress + header, FrameHeader.LENGTH, headerMemoryLkey);
        countSend(signal, inline);
        counts.increment(CREDIT_FRAMES_SENT);
    }

    private void countSend(boolean signal, boolean inline) {
        counts.increment(SENDS_POSTED);
        if (signal) {
            counts.increment(SIGNALED_SENDS);
        }
        if (inline) {
            counts.increment(INLINE_SENDS);
        }
    }

    private FabricException post() {
        if (sendList.isEmpty()) {
            return null;
        }
        try {
            qp.postSend(sendList);
            counts.increment(POST_CALLS);
            return null;
        } catch (FabricException e) {
            // ibv_post_send stops at the first bad request: those before it were posted and will complete, the
            // rest never reach the queue pair and must not be waited for
            int posted = PartialPostException.postedOf(e, sendList.size());
            takeBackUnposted(sendList.size() - posted);
            return new FabricException("channel " + id + " (" + Endpoints.describe(remote) + "): posting "
                    + sendList.size() + " sends failed after " + posted + ": " + e.getMessage(), e);
        } finally {
            sendList.clear();
            for (int i = 0; i < inlineCount; i++) {
                inlineDone[i].releaseFromChannel();
                inlineDone[i] = null;
            }
            inlineCount = 0;
        }
    }

    /** The last {@code unposted} claims of the ring never reached the queue pair: out of the ring they go. */
    private void takeBackUnposted(int unposted) {
        for (int i = 0; i < unposted; i++) {
            PooledBuffer b = ring.unclaimLast();
            if (b != null) {
                heldUntilTeardown.add(b); // its earlier fragments may have been posted and still point into it
            }
        }
        counts.add(SENDS_POSTED, -unposted);
    }

    /** A send completion (any status) for {@code slot}: it and every request before it are done. */
    void retireThrough(int slot) {
        ring.retireThrough(slot);
    }

    /** Returns whether the channel just turned unwritable (the loop's tick then watches unwritableTimeout). */
    boolean updateWritability() {
        long queued = outbox.queuedBytes();
        if (writable && queued > config.writeHighWaterMark()) {
            writable = false;
            return true;
        } else if (!writable && queued <= config.writeHighWaterMark() / 2) {
            writable = true;
            writableOwed = true;
        }
        return false;
    }

    /** Whether onWritable is owed to the handler (only while {@code open}); clears the debt. */
    boolean takeWritableOwed(boolean open) {
        updateWritability();
        boolean owed = writableOwed && open;
        writableOwed = false;
        return owed;
    }

    boolean isWritable() {
        return writable;
    }

    void stopWriting() {
        writable = false;
    }

    boolean outboxEmpty() {
        return outbox.isEmpty();
    }

    int outboxSize() {
        return outbox.size();
    }

    int ringOutstanding() {
        return ring == null ? 0 : ring.outstanding();
    }

    int signaledOutstanding() {
        return ring == null ? 0 : ring.signaledOutstanding();
    }

    /** Releases every buffer the side still holds; only once the queue pair is destroyed (nothing points in). */
    void releaseAll() {
        writable = false;
        if (ring != null) {
            ring.retireAll();
        }
        outbox.releaseAll();
        for (PooledBuffer b : heldUntilTeardown) {
            b.releaseFromChannel();
        }
        heldUntilTeardown.clear();
    }

    /**
     * Diagnostics, read without the lock (see {@code PublishedMeasures.debugState}): each number is one its field held
     * recently, not all of them at one instant; plain reads of ints and references, which cannot fail.
     */
    String debugState() {
        SendRing r = ring; // once: read without the lock
        return "credits=" + credits.sendCredits() + " owed=" + credits.owed() + " returning=" + credits.isReturning()
                + " outbox=" + outbox.size() + "/" + outbox.queuedBytes() + "B ring=" + (r == null ? "-"
                : r.outstanding() + "/" + r.capacity() + " signaled=" + r.signaledOutstanding())
                + " writable=" + writable;
    }
}
