package dev.artemisrdma.transport.flow;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.fabric.RegisteredMemory;
import dev.artemisrdma.transport.fabric.SharedReceiveQueue;
import dev.artemisrdma.transport.stats.ChannelMeasures;
import dev.artemisrdma.transport.wire.FrameHeader;
import dev.artemisrdma.transport.wire.Handshake;
import dev.artemisrdma.transport.wire.WorkRequestIds;

/**
 * One completion loop's shared receive queue, the registered slots its receives point into, and the receive credits
 * the loop's connections hold on it.
 *
 * <p>Scope: one pool per completion loop (per completion queue), not per acceptor. The loop thread alone polls the
 * pool's completions, reposts its slots and regrants their credit, in the same batch, without a lock on the data
 * path; a connection lives on exactly one loop, so its credits come from exactly one pool; and the completion
 * queue's entry budget covers the pool once (every posted receive can complete at most once) plus each connection's
 * send budget, so the queue can never overrun. A pool per acceptor would be shared by several loop threads (locks on
 * every repost, and a receive completing on one loop's queue for a connection another loop serves), and a pool per
 * device even more so. The price of this choice: memory is {@code sharedReceiveSlots * slotSize} per loop that
 * serves accepted connections, and loops are added when completion queues fill.
 *
 * <p>No SEND meets an empty queue. Each credit a peer holds is one posted receive promised to it. The pool keeps
 * {@code sum over connections of max(allocation, minimum) <= slots}, where a connection's allocation is every credit
 * granted to it and not yet consumed (held by the peer, in flight, or owed back to it). A consumed receive is
 * reposted in the batch that saw it, before its credit is granted again, or held back for a later batch's post (up to
 * 15) only while the spare covers it ({@link #hold}: {@code committed + held <= slots}), so the credits outstanding
 * never exceed the receives posted. Each connection is admitted only if its minimum
 * ({@link TransportConfig#SHARED_MIN_CREDITS}) fits, so none can be starved by the others: the minimum is always its
 * to use. Beyond it, a connection whose peer says frames wait for credit ({@link FrameHeader#HINT_CREDIT_WANTED})
 * grows, up to receiveSlots + 1, while the pool has spare; when a request finds none, the pool is under pressure and
 * connections that did not ask give their consumed credits back to it instead of keeping them, until the spare
 * returns.
 *
 * <p>Fair shares, enforced here whatever the peers do (issue 23):
 * <ul>
 * <li>Only a peer that answers recalls ({@link Handshake#FEATURE_CREDIT_RECALL}) grows: a window the pool could
 * never ask back stays at the minimum (the handshake tells that peer so).</li>
 * <li>Growth never takes the pool's last {@link TransportConfig#sharedReceiveReserve} receives: they are kept for the
 * minimums of connections still to come, so windows that grew never make the pool refuse a newcomer.</li>
 * <li>A window that holds more than its fair share ({@link #fairShare}: the pool less the reserve, split evenly) when
 * a recall comes, and still does a {@link #RECALL_INTERVAL_NANOS} later, is capped at its share: what it spends is
 * granted back only up to it, however often it says it wants more. One that then stays above its cap for a whole
 * interval without spending a credit (a peer that neither answers nor spends) while a newcomer is refused admission
 * is failed, the largest first, one per recall: the connection that holds the most goes, never the one that asks
 * next. Growth alone never fails anyone: a window that wants more waits for the capped ones to spend down.</li>
 * </ul>
 *
 * <p>A grown window that went idle consumes nothing, so it would keep its credits for good: a few bursts, then
 * connections refused because the pools are promised to windows nobody uses. So the pool recalls: when a growth
 * request or an admission finds too little spare, or a grant leaves less than an eighth of the slots spare, the
 * loop's next tick (at most every {@link #RECALL_INTERVAL_NANOS}, at once for a refused admission, which a connection
 * waits for) asks every connection whose window grew beyond the
 * minimum to give back what it holds beyond it ({@link FrameHeader#RECALL}). A peer with nothing queued answers with
 * the credits given back ({@link FrameHeader#RELEASE}), which leave its allocation; a busy one keeps its window.
 * Before asking, the channel takes back the credits it was granted but has not yet sent to its peer
 * ({@link #withdraw}): the peer holds only what it was sent, and cannot give back the rest, which it never had.
 * Peers from before recalls ({@link Handshake#FEATURE_CREDIT_RECALL}) are not asked. The recall costs an idle pool
 * nothing: it runs only after such an event and only while some window is grown.
 *
 * <p>A connection's credits return to the pool when it is released, after its queue pair is destroyed. A receive it
 * consumed just before that may still sit unpolled in the completion queue (the slot is then not yet reposted), so
 * released credits wait {@link #LIMBO_NANOS} before they can be granted again.
 *
 * <p>The SRQ limit event (IBV_EVENT_SRQ_LIMIT_REACHED, armed with {@link SharedReceiveQueue#armLimit}) reports the
 * posted count falling below a mark. With credits it can only mean a bug or a peer that sends without credit (which
 * rnrRetryCount then reports on that peer's connection): the pool arms it at a quarter of its slots as a safety
 * signal for whoever reads the device's async events; flow control never depends on it.
 *
 * <p>Threads: the receive path (consumed, repost, the view) is the loop thread's; admission and release come from
 * connection-manager threads too, so the accounting is guarded by this object's monitor (uncontended on the data
 * path: one short section per connection per batch).
 */
public final class SharedReceivePool implements AutoCloseable, ChannelMeasures.SharedPool {

    private static final Logger LOG = LoggerFactory.getLogger(SharedReceivePool.class);
    /** How long released credits wait before they can be granted again (see the class comment). */
    static final long LIMBO_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
    /** Credits a connection asking for more gets at most in one batch (beyond what it consumed). */
    private static final int GROWTH_STEP = 8;
    /** Consumed receives reposted in one post at most while the pool's spare lets them wait ({@link #hold}). */
    static final int REPOST_BATCH = 16;
    /** Recalls of one pool are at least this far apart. */
    static final long RECALL_INTERVAL_NANOS = TimeUnit.MILLISECONDS.toNanos(250);
    /** Recalls in a row that brought nothing back, after which a refused admission is told the loops are full. */
    static final int FRUITLESS_RECALLS = 2;

    /** The credits one connection holds on the pool; guarded by the pool. */
    public static final class Allocation {
        private volatile int credits;
        private boolean released;
        /** Its peer answers recalls: only then does its window grow beyond the minimum. */
        private final boolean growable;
        /**
         * It let a recall go unanswered above its fair share: it is granted at most its fair share from then on,
         * until it gives credits back down to it.
         */
        private boolean capped;
        /** When a recall found it above its fair share, uncapped (0: within it since). */
        private long askedAt;
        /**
         * Since when it has stayed above its fair share, capped, without spending down toward it (0: within it, or
         * spending: a slow sender spends a few credits per interval and is never judged a hog).
         */
        private long overCapSince;
        /** Its credits at the last judgement, to tell a window that spends from one that holds. */
        private int creditsAtJudge;
        /** Why the pool fails its connection, or null; the loop reads it in the channel's recall. */
        private volatile String evicted;

        private Allocation(boolean growable) {
            this.growable = growable;
        }

        public int credits() {
            return credits;
        }

        /** Why the pool wants this connection failed (it kept more than its fair share), or null. */
        public String evicted() {
            return evicted;
        }
    }

    private final String name;
    private final SharedReceiveQueue srq;
    private final RegisteredMemory memory;
    /** The memory's start and key, read once: each repost adds an entry without loads through its wrappers. */
    private final long memoryAddress;
    private final int memoryLkey;
    private final ByteBuffer view;
    private final int slots;
    private final int slotSize;
    private final int minimum;
    private final int maximum;
    /** Receives growth never takes ({@link TransportConfig#sharedReceiveReserve}). */
    private final int reserve;
    /** Every admitted allocation not yet released; guarded by this. */
    private final ArrayList<Allocation> members = new ArrayList<>();
    /** Allocations above their fair share at the last recall (evicted ones included); guarded by this. */
    private int overShare;
    /** Consumed slots to repost: the loop thread's. */
    private final RecvList repost;
    /** How many consumed slots may be held unposted at most: below {@link #REPOST_BATCH}, and an eighth of the pool. */
    private final int holdLimit;
    /**
     * Consumed slots in {@link #repost}, held unposted ({@link #hold}): written by the loop thread under this
     * object's monitor, read under it by admissions and grants; the loop, its only writer, reads it without.
     */
    private int unpostedHeld;
    /** Released credits and when they may be reused; guarded by this. */
    private final ArrayDeque<long[]> limbo = new ArrayDeque<>();
    private int committed;
    private int limboCredits;
    private int connections;
    private boolean pressure;
    /** Set under the pool's monitor; volatile so the loop can glance at it after each batch without the monitor. */
    private volatile boolean recallWanted;
    /**
     * An admission was refused since the last judgement: only then may a judgement fail a connection (see
     * {@link #judge}). Guarded by this.
     */
    private boolean admissionStarved;
    /** A refused admission asked: the next tick recalls without waiting out the interval. */
    private boolean recallUrgent;
    private long lastRecall = System.nanoTime() - RECALL_INTERVAL_NANOS;
    /**
     * {@link #creditsReleased} when a recall began at {@code recallMarkTime}, and how many recalls in a row, each at
     * least an interval after the one marked before, found that none had come back since.
     */
    private long releasedAtRecallMark = -1;
    private long recallMarkTime;
    private int fruitlessRecalls;
    private boolean closed;

    volatile long growthGrants;
    volatile long growthRefused;
    volatile int peakCommitted;
    private volatile long recalls;
    private volatile long creditsReleased;
    volatile long admissionsRefused;

    private SharedReceivePool(String name, SharedReceiveQueue srq, RegisteredMemory memory, int slots, int slotSize,
                              int maximum, int reserve) {
        this.name = name;
        this.srq = srq;
        this.memory = memory;
        this.memoryAddress = memory.address();
        this.memoryLkey = memory.lkey();
        this.view = memory.buffer().duplicate();
        this.slots = slots;
        this.slotSize = slotSize;
        this.minimum = TransportConfig.SHARED_MIN_CREDITS;
        this.maximum = Math.max(minimum, maximum);
        this.reserve = Math.min(slots, reserve);
        this.repost = new RecvList(slots);
        this.holdLimit = Math.min(REPOST_BATCH - 1, slots / 8);
    }

    /**
     * Registers {@code sharedReceiveSlots * slotSize} (counted against maxRegisteredMemory when {@code device} is the
     * transport's accounted view), creates the SRQ and posts every slot. What was made is undone on failure.
     */
    public static SharedReceivePool create(String name, FabricDevice device, TransportConfig config)
            throws FabricException {
        int slots = config.sharedReceiveSlots();
        long bytes = config.sharedPoolBytes();
        RegisteredMemory memory = device.register(Math.toIntExact(bytes)); // TransportConfig refuses larger pools
        SharedReceiveQueue srq = null;
        try {
            srq = device.createSharedReceiveQueue(slots);
            if (srq.capacity() < slots) {
                throw new FabricException("shared receive queue on " + device.name() + " holds " + srq.capacity()
                        + " receives, sharedReceiveSlots asks " + slots);
            }
            SharedReceivePool pool = new SharedReceivePool(name, srq, memory, slots, config.slotSize(),
                    config.sharedMaxCredits(), config.sharedReceiveReserve());
            RecvList all = new RecvList(slots);
            for (int s = 0; s < slots; s++) {
                pool.add(all, s);
            }
            srq.postRecv(all);
            try {
                srq.armLimit(Math.max(1, slots / 4));
            } catch (FabricException e) {
                LOG.debug("{}: SRQ limit event not armed: {}", name, e.getMessage());
            }
            LOG.info("{}: shared receive queue of {} receives x {} bytes ({} KiB registered) on {}", name, slots,
                    config.slotSize(), bytes >> 10, device.name());
            return pool;
        } catch (FabricException | RuntimeException e) {
            if (srq != null) {
                srq.close(); // receives posted on it die with it, before their memory goes
            }
            memory.close();
            throw e;
        }
    }

    private void add(RecvList list, int slot) {
        list.add(WorkRequestIds.SHARED_POOL_RECEIVE | slot, memoryAddress + (long) slot * slotSize, slotSize,
                memoryLkey);
    }

    public SharedReceiveQueue queue() {
        return srq;
    }

    public int slots() {
        return slots;
    }

    @Override
    public long registeredBytes() {
        return memory.length();
    }

    /** Recalls made since the pool was created, for monitoring. */
    public long recalls() {
        return recalls;
    }

    /** Credits that grown windows gave back on recalls, or that recalls took back before they were sent, for monitoring. */
    public long creditsReleased() {
        return creditsReleased;
    }

    /** The slot's bytes are read from this view (loop thread). */
    public ByteBuffer view() {
        return view;
    }

    /** Where {@code slot} starts in {@link #view()}; -1 for an id that is not one of ours. */
    public int base(int slot) {
        return slot >= 0 && slot < slots ? slot * slotSize : -1;
    }

    /** A receive of the pool completed (whatever its status or connection): its slot is reposted, or held. */
    public void consumed(int slot) {
        if (slot >= 0 && slot < slots) {
            add(repost, slot);
        }
    }

    /**
     * Reposts the consumed slots at the end of a batch, before any of their credit is granted again (loop thread);
     * or holds up to {@link #REPOST_BATCH} - 1 of them back for a later batch's post, while the pool's spare covers
     * them ({@link #hold}): one post (and one lock of the queue) for up to 16 receives, as ib_send_lat's receive
     * batches and UCX's, where a ping-pong reposted one receive per message.
     */
    public void repostConsumed() throws FabricException {
        int n = repost.size();
        if (n == 0 || (n <= holdLimit && hold(n))) {
            return;
        }
        postRepost();
    }

    /** Posts the receives held back: the loop is about to block, idle (loop thread). */
    public void repostHeld() throws FabricException {
        if (!repost.isEmpty()) {
            postRepost();
        }
    }

    private void postRepost() throws FabricException {
        try {
            srq.postRecv(repost);
        } finally {
            repost.clear();
            if (unpostedHeld != 0) { // the monitor only after a hold: most posts follow none
                synchronized (this) {
                    unpostedHeld = 0;
                }
            }
        }
    }

    /**
     * Whether {@code n} consumed receives may stay unposted for now. No SEND may meet an empty queue: every credit
     * granted is a posted receive, and credits outstanding never exceed {@link #committed}, so receives may be held
     * only while {@code committed + unpostedHeld <= slots}. An admission or a growth counts the held ones as taken
     * ({@link #admit}, {@link #regrant}); a hold is taken only with the reserve and one more connection's minimum
     * still spare, so a newcomer is not refused for them but in a pool that is full anyway.
     */
    private synchronized boolean hold(int n) {
        if (committed + n + minimum > slots - reserve) {
            return false;
        }
        unpostedHeld = n;
        return true;
    }

    /**
     * Admits a connection with its guaranteed minimum; null when the pool cannot promise it. {@code growable}: its
     * peer answers recalls, so its window may grow (see the class comment).
     */
    public synchronized Allocation admit(boolean growable) {
        reclaimLimbo(System.nanoTime());
        if (closed || committed + minimum + unpostedHeld > slots) {
            admissionsRefused++;
            admissionStarved = true;
            wantRecall("an admission found no room");
            recallUrgent = recallWanted; // a refused connection retries soon (RdmaTransport.RecallPending)
            return null;
        }
        Allocation a = new Allocation(growable);
        a.credits = minimum;
        committed += minimum;
        connections++;
        members.add(a);
        notePeak();
        return a;
    }

    /** The credits a connection starts with: what its handshake offers the peer. */
    public int minimum() {
        return minimum;
    }

    /**
     * {@code consumed} of the connection's credits were spent (their receives are reposted already) and
     * {@code released} given back unspent: how many credits it is granted now. It keeps its allocation, grows while
     * it asks, answers recalls and the pool has spare beyond the reserve, gives consumed credit back to the pool when
     * others are waiting and it did not ask, or when it has just given credits back (it is idle), and shrinks to its
     * cap when it holds more (asking or not). -1: the peer spent or gave back more credits than
     * it was sent ({@code owed}: granted credits not yet sent to it; a protocol error that fails its connection, since
     * the receives it took were promised to others).
     */
    public synchronized int regrant(Allocation a, int consumed, boolean wanted, int owed, int released) {
        if (a.released) {
            return 0;
        }
        int held = a.credits; // before this batch's consumption
        int others = committed - Math.max(held, minimum);
        // credits sent and not yet spent are held - owed (owed only shrinks as we send it, so a late check is lenient)
        if (consumed + released > held - owed) {
            // the peer sent without credit: it took receives promised to others; its connection must fail
            a.credits = 0;
            committed = others + minimum;
            return -1;
        }
        if (released > 0) {
            creditsReleased += released; // a volatile write: not on every regrant of the data path
        }
        int kept = held - released;
        int after = kept - consumed;
        int cap = a.capped ? fairShare() : maximum;
        int target = kept;
        if (!wanted && (pressure || released > 0) && kept > minimum) {
            target = Math.max(minimum, after);
        } else if (kept > cap) {
            // it left a recall unanswered above its fair share: what it spends comes back only up to the share, and
            // saying that frames wait (on every frame, if it likes) changes nothing
            target = Math.max(cap, after);
        } else if (wanted && a.growable && kept < cap) {
            // growth never takes the receives kept for newcomers, nor those held unposted (within the reserve,
            // unless a pool is configured with a reserve smaller than what it holds)
            int room = slots - Math.max(reserve, unpostedHeld) - others;
            int grown = Math.min(cap, Math.min(room, kept + Math.max(GROWTH_STEP, consumed)));
            if (grown > kept) {
                target = grown;
                growthGrants++;
                if (room - grown < GROWTH_STEP) {
                    wantRecall("a grant left less than a growth step above the reserve");
                }
            } else {
                growthRefused++;
                pressure = true;
                wantRecall("a growth request found no room");
            }
        }
        if (released > 0 && a.capped && target <= cap) {
            a.capped = false; // it answered a recall down to its share: trusted again
        }
        if (a.credits != target) {
            a.credits = target; // volatile: written only when it changes, which a steady window's batches do not
        }
        committed = others + Math.max(target, minimum);
        notePeak();
        if (pressure && slots - reserve - committed >= GROWTH_STEP) {
            pressure = false;
        }
        return target - after;
    }

    /**
     * {@link #peakCommitted} follows {@link #committed} up (under this object's monitor): a volatile write only when
     * it grows, since {@link #regrant} runs once per batch.
     */
    private void notePeak() {
        if (committed > peakCommitted) {
            peakCommitted = committed;
        }
    }

    /**
     * What each connection may hold when the pool is contended: the receives beyond the reserve split evenly over
     * the connections on it, and never less than the guaranteed minimum. Guarded by this.
     */
    private int fairShare() {
        return Math.max(minimum, (slots - reserve) / Math.max(1, connections));
    }

    /**
     * A recall runs now: each window above its fair share is asked (this recall), capped at the share once it let
     * an interval pass above it, and failed once it stayed above its share, capped, for another whole interval
     * without spending a credit (a peer that spends shrinks toward its share, since what it spends is granted back
     * only up to it, and the clock restarts whenever it did; one that neither spends nor gives back cannot be
     * shrunk): the largest such one per recall, and only while a connection is refused admission for want of its
     * receives. Growth that finds no room caps windows but fails none: what we see of "spending" is what arrives,
     * and a busy sender's SENDs can be on a congested fabric for longer than an interval (the lab's burst of 100
     * connections met 300 ms, the senders at their last credit with 40 frames waiting); failing a connection is
     * kept for a peer that keeps a newcomer out. While any is above its share, another recall follows an interval
     * later. Guarded by this.
     */
    private void judge(long now) {
        int fair = fairShare();
        Allocation worst = null;
        int above = 0;
        for (Allocation a : members) {
            if (a.evicted != null) {
                above++; // its credits come back once its connection is gone
                continue;
            }
            if (a.credits <= fair) {
                a.askedAt = 0;
                a.overCapSince = 0;
                continue;
            }
            above++;
            if (a.capped) {
                if (a.overCapSince == 0 || a.credits < a.creditsAtJudge) {
                    // newly above its cap (the share fell: more connections), or spending down toward it: what it
                    // consumes is granted back only up to its share, so a sender that spends, however slowly, shrinks
                    a.overCapSince = now;
                } else if (now - a.overCapSince >= RECALL_INTERVAL_NANOS
                        && (worst == null || a.credits > worst.credits)) {
                    worst = a; // a whole interval above its cap without spending a credit: it holds, it does not use
                }
                a.creditsAtJudge = a.credits;
            } else if (a.askedAt == 0) {
                a.askedAt = now;
            } else if (now - a.askedAt >= RECALL_INTERVAL_NANOS) {
                a.capped = true;
                a.overCapSince = now;
                a.creditsAtJudge = a.credits;
            }
        }
        if (worst != null && admissionStarved) {
            worst.evicted = "it kept " + worst.credits + " receive credits of the shared pool, above its fair share of "
                    + fair + ", for " + TimeUnit.NANOSECONDS.toMillis(now - worst.overCapSince) + " ms after a "
                    + "recall it left unanswered (it neither gave them back nor spent them); failed so that the "
                    + "pool's other connections and newcomers get theirs";
        }
        admissionStarved = false;
        overShare = above;
        if (above > 0) {
            recallWanted = true; // judged again an interval from now
        }
    }

    /** Credits granted beyond the minimum, over every connection (those in limbo aside); guarded by this. */
    private int grown() {
        return committed - limboCredits - connections * minimum;
    }

    private void wantRecall(String why) {
        if (grown() > 0 && !recallWanted) {
            recallWanted = true;
            LOG.debug("{}: recall wanted: {} ({} of {} receives promised, {} beyond the minimums)", name, why,
                    committed, slots, grown());
        }
    }

    /** Whether an event asked for a recall that has not run yet (the loop must tick soon); no lock taken. */
    public boolean recallWanted() {
        return recallWanted;
    }

    /**
     * Whether an admission refused now may find room soon: a window above its fair share is on its way to being
     * capped or failed, credits of a closed connection wait out their quarantine, or a recall is wanted or ran within
     * {@link #RECALL_INTERVAL_NANOS} while some window is still grown. The last not once {@value #FRUITLESS_RECALLS}
     * recalls in a row brought nothing back (the windows' holders hold no more than their share, or only credits
     * they were never sent): then a refusal says the loops are full, instead of asking the peer to retry in vain.
     */
    public synchronized boolean recallUnderWay(long now) {
        return overShare > 0 || !limbo.isEmpty() || grown() > 0 && fruitlessRecalls < FRUITLESS_RECALLS
                && (recallWanted || now - lastRecall < RECALL_INTERVAL_NANOS);
    }

    /**
     * True when the loop should recall grown windows now ({@link #RECALL_INTERVAL_NANOS} after the last time): an
     * event asked for it and some window is still grown. The loop then asks its connections
     * ({@code LoopChannel.recall}) to keep {@link #minimum()}.
     */
    public synchronized boolean recallDue(long now) {
        if (!recallWanted || grown() <= 0) {
            recallWanted = false;
            return false;
        }
        if (now - lastRecall < RECALL_INTERVAL_NANOS && !recallUrgent) {
            return false;
        }
        lastRecall = now;
        recallWanted = false;
        recallUrgent = false;
        // the marked recall had an interval to be answered (refusals recall sooner): did any credit come back?
        if (releasedAtRecallMark < 0 || now - recallMarkTime >= RECALL_INTERVAL_NANOS) {
            fruitlessRecalls = releasedAtRecallMark >= 0 && creditsReleased == releasedAtRecallMark
                    ? fruitlessRecalls + 1 : 0;
            releasedAtRecallMark = creditsReleased;
            recallMarkTime = now;
        }
        recalls++;
        judge(now);
        return true;
    }

    /** A connection tearing down spent {@code consumed} credits: nothing is granted back. */
    public synchronized void forfeit(Allocation a, int consumed) {
        if (!a.released) {
            int before = Math.max(a.credits, minimum);
            a.credits = Math.max(0, a.credits - consumed);
            committed += Math.max(a.credits, minimum) - before;
        }
    }

    /**
     * Takes back {@code credits} of a connection's window that were granted but never sent to its peer (the
     * channel owed them; their receives are posted on the shared queue already): the peer never heard of them, so
     * no message is needed and nothing it does can be disturbed. Counted as given back, like a release: a recall
     * that brings these back was not fruitless, and a capped window down to its share is trusted again.
     */
    public synchronized void withdraw(Allocation a, int credits) {
        if (a.released || credits <= 0) {
            return;
        }
        if (credits > a.credits - minimum) {
            throw new IllegalArgumentException("withdrawing " + credits + " of " + a.credits + " credits would leave "
                    + "less than the minimum of " + minimum);
        }
        int before = Math.max(a.credits, minimum);
        a.credits -= credits;
        committed += Math.max(a.credits, minimum) - before;
        creditsReleased += credits;
        if (a.capped && a.credits <= fairShare()) {
            a.capped = false;
        }
        if (pressure && slots - reserve - committed >= GROWTH_STEP) {
            pressure = false;
        }
    }

    /** The connection is gone (its queue pair destroyed): its credits return after {@link #LIMBO_NANOS}. */
    public synchronized void release(Allocation a) {
        if (a.released) {
            return;
        }
        a.released = true;
        connections--;
        members.remove(a);
        int held = Math.max(a.credits, minimum);
        a.credits = 0;
        limbo.addLast(new long[] {System.nanoTime() + LIMBO_NANOS, held});
        limboCredits += held;
    }

    /**
     * Returns credits whose quarantine is over to the pool; true while some are still waiting, or a recall waits
     * for its interval (the loop keeps ticking until it runs).
     */
    public synchronized boolean tick(long now) {
        reclaimLimbo(now);
        return !limbo.isEmpty() || (recallWanted && grown() > 0);
    }

    private void reclaimLimbo(long now) {
        while (!limbo.isEmpty() && now - limbo.peekFirst()[0] >= 0) {
            int held = (int) limbo.pollFirst()[1];
            committed -= held;
            limboCredits -= held;
        }
    }

    /** Credits promised to connections (and in limbo) right now. */
    synchronized int committed() {
        return committed;
    }

    synchronized int connections() {
        return connections;
    }

    /** Destroys the SRQ, then its memory; every queue pair on it must be destroyed already. Idempotent. */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        try {
            srq.close();
        } catch (RuntimeException e) {
            // receives still posted point into the memory: leaking it is safe, deregistering it is not
            LOG.error("{}: destroying the shared receive queue failed; its {} bytes stay registered", name,
                    memory.length(), e);
            return;
        }
        memory.close();
        LOG.debug("{}: shared receive queue destroyed", name);
    }

    @Override
    public String toString() {
        return name + "[" + slots + " slots, " + committed + " committed]";
    }
}
