package dev.artemisrdma.transport.flow;

import java.nio.ByteBuffer;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * The heap that all connections of one transport may hold for frames being reassembled ({@code reassemblyMemory}),
 * shared by a fair-share rule that never depends on the peers (issue 23, issue 37 hole 2):
 * <ul>
 * <li>A connection reserves what its reassembly buffer really grows to (at most half again what arrived) and gives
 * it back when the buffer goes.</li>
 * <li>A buffer kept between frames is lent to this budget, not held by its connection: it is a cache. Kept buffers
 * may hold at most an eighth of the budget together, none is kept while the budget is more than half used, and when
 * a reservation does not fit they are dropped first, the longest kept first: an idle connection never holds what a
 * frame in progress needs, whether or not it ever receives again.</li>
 * <li>When a reservation still does not fit, the victim is not the connection that asks next: it is, among the
 * others with a frame in progress, the one whose frame began the longest ago of those that hold more than their
 * fair share (the budget split over the connections reassembling, the asker included), or at least their share
 * with a frame begun more than {@link #SQUAT_NANOS} (1 s) ago. A frame that flows finishes in milliseconds, so what
 * sits on its whole share for a second squats; without this, connections holding exactly their share locked
 * everyone out, and a squatter that finished each frame inside {@code reassemblyTimeout} and began again was never
 * failed. That connection is condemned: its loop fails it at its next tick and its buffer comes back; until then the
 * budget may be overdrawn by what it holds, so the asker is served at once. Only when no other connection is such
 * a holder does the asker fail: then it asks beyond its share while every other holder is below it, or is a young
 * frame that streams.</li>
 * </ul>
 * Thread safe: the completion loops of every device draw on one budget; the kept buffers and the victim search are
 * guarded by this object's lock, taken when a fragmented frame begins or ends and when the budget is short.
 */
public final class ReassemblyBudget {

    /** How long a frame may sit on its whole fair share before it counts as squatting (see the class comment). */
    static final long SQUAT_NANOS = TimeUnit.SECONDS.toNanos(1);

    private final long limit;
    private final LongSupplier clock;
    private final AtomicLong used = new AtomicLong();
    /** Bytes of buffers kept between frames; guarded by this (read without it for monitoring). */
    private volatile long kept;
    /** Buffers kept between frames, the longest kept first; their bytes count in {@link #used}. Guarded by this. */
    private final Map<Reassembler, ByteBuffer> keptBuffers = new LinkedHashMap<>();
    /** Bytes that condemned connections still hold: the overdraft their coming release covers. */
    private final AtomicLong condemned = new AtomicLong();
    /** Connections with a frame in progress (their buffers reserved here); guarded by this. */
    private final Set<Reassembler> holders = new HashSet<>();
    private final AtomicLong victims = new AtomicLong();
    private final AtomicLong keptDropped = new AtomicLong();

    public ReassemblyBudget(long limit) {
        this(limit, System::nanoTime);
    }

    /** With {@code clock} (nanoseconds) timing frames: tests move it. */
    ReassemblyBudget(long limit, LongSupplier clock) {
        this.limit = limit;
        this.clock = clock;
    }

    /** The time a frame's first fragment is stamped with (System.nanoTime unless a test set a clock). */
    long now() {
        return clock.getAsLong();
    }

    /** Takes {@code bytes}; false (and nothing taken) when that would exceed the limit (plus the overdraft). */
    boolean tryReserve(long bytes) {
        return addWithin(used, bytes, limit + condemned.get());
    }

    void release(long bytes) {
        used.addAndGet(-bytes);
    }

    /**
     * {@code r} began a fragmented frame: it counts among the holders, and gets back the buffer it lent between
     * frames, if the budget did not drop it meanwhile (its bytes stay reserved for {@code r}); null otherwise.
     */
    synchronized ByteBuffer holding(Reassembler r) {
        holders.add(r);
        return takeKept(r);
    }

    /**
     * {@code r} finished its frame or let it go: if it was condemned meanwhile, it is pardoned (a frame that
     * finished was no squatter) and the overdraft it covered ends. Under the lock, so that a connection is never
     * condemned after it stopped holding.
     */
    synchronized void notHolding(Reassembler r) {
        holders.remove(r);
        long held = r.pardon();
        if (held > 0) {
            condemned.addAndGet(-held);
        }
    }

    /**
     * Lends {@code buffer} (reserved here) to the budget until {@code r}'s next fragmented frame, if kept buffers
     * stay within an eighth of the budget and the budget is at most half used; false: {@code r} drops it.
     */
    synchronized boolean keep(Reassembler r, ByteBuffer buffer) {
        long bytes = buffer.capacity();
        if (used.get() > limit / 2 || kept + bytes > limit / 8) {
            return false;
        }
        keptBuffers.put(r, buffer);
        kept += bytes;
        return true;
    }

    /** Takes back what {@code r} lent (its bytes stay reserved: the caller holds or releases them), or null. */
    synchronized ByteBuffer takeKept(Reassembler r) {
        ByteBuffer buffer = keptBuffers.remove(r);
        if (buffer != null) {
            kept -= buffer.capacity();
        }
        return buffer;
    }

    /**
     * Drops kept buffers, the longest kept first, until {@code bytes} fit (or none is left); returns whether
     * anything was dropped. Their connections allocate anew at their next fragmented frame.
     */
    synchronized boolean reclaimKept(long bytes) {
        boolean dropped = false;
        Iterator<ByteBuffer> it = keptBuffers.values().iterator();
        while (it.hasNext() && used.get() + bytes > limit + condemned.get()) {
            long capacity = it.next().capacity();
            it.remove();
            kept -= capacity;
            used.addAndGet(-capacity);
            keptDropped.incrementAndGet();
            dropped = true;
        }
        return dropped;
    }

    /** Adds {@code bytes} to {@code counter} unless that would take it above {@code cap}. */
    private static boolean addWithin(AtomicLong counter, long bytes, long cap) {
        while (true) {
            long now = counter.get();
            if (now + bytes > cap) {
                return false;
            }
            if (counter.compareAndSet(now, now + bytes)) {
                return true;
            }
        }
    }

    /**
     * {@code asker} found the budget short: condemns the connection that squats (see the class comment), the one
     * whose frame began the longest ago, if any, and lets the budget be overdrawn by what it holds. Returns whether
     * one was condemned.
     */
    synchronized boolean condemnSquatter(Reassembler asker) {
        int count = holders.size() + (holders.contains(asker) ? 0 : 1);
        long fairShare = limit / count;
        long now = clock.getAsLong();
        Reassembler victim = null;
        for (Reassembler r : holders) {
            if (r == asker || r.condemned()) {
                continue;
            }
            long held = r.heldBytes();
            boolean squats = held > fairShare || (held >= fairShare && now - r.startedAt() > SQUAT_NANOS);
            if (squats && (victim == null || r.startedAt() - victim.startedAt() < 0)) {
                victim = r;
            }
        }
        if (victim == null) {
            return false;
        }
        long ageMillis = TimeUnit.NANOSECONDS.toMillis(now - victim.startedAt());
        long held = victim.condemn("its unfinished frame held " + victim.heldBytes() + " bytes of reassemblyMemory ("
                + limit + ") for " + ageMillis + " ms, at or above the fair share of " + fairShare + " among the "
                + count + " connections reassembling, and began the longest ago, when another connection needed room");
        condemned.addAndGet(held);
        victims.incrementAndGet();
        return true;
    }

    public long used() {
        return used.get();
    }

    /** Connections counted as reassembling (for tests). */
    synchronized int holders() {
        return holders.size();
    }

    /** Bytes of buffers kept between frames. */
    public long kept() {
        return kept;
    }

    /** Connections failed to make room for others. */
    public long victims() {
        return victims.get();
    }

    /** Kept buffers dropped to make room for frames in progress. */
    public long keptDropped() {
        return keptDropped.get();
    }

    long limit() {
        return limit;
    }
}
