package dev.artemisrdma.transport.flow;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The heap that all connections of one transport may hold for frames being reassembled ({@code reassemblyMemory}),
 * shared by a fair-share rule that never depends on the peers (issue 23):
 * <ul>
 * <li>A connection reserves what its reassembly buffer really grows to (at most half again what arrived) and gives
 * it back when the buffer goes.</li>
 * <li>Buffers kept between frames may hold at most an eighth of the budget together, and none is kept while the
 * budget is more than half used: idle connections never hold what frames in progress need.</li>
 * <li>When a reservation does not fit, the victim is not the connection that asks next: it is the connection
 * holding more than its fair share (the budget split over the connections reassembling, the asker included) whose
 * unfinished frame began the longest ago, the one that squats longest (a frame that flows finishes in
 * milliseconds). That connection is condemned: its loop fails it at its next tick and its buffer comes back; until
 * then the budget may be overdrawn by what it holds, so the asker is served at once. Only when no other connection
 * holds more than its share does the asker fail: then it is the one asking beyond its share.</li>
 * </ul>
 * Thread safe: the completion loops of every device draw on one budget; the victim search takes this object's lock,
 * only when the budget is short.
 */
public final class ReassemblyBudget {

    private final long limit;
    private final AtomicLong used = new AtomicLong();
    /** Bytes of buffers kept between frames. */
    private final AtomicLong kept = new AtomicLong();
    /** Bytes that condemned connections still hold: the overdraft their coming release covers. */
    private final AtomicLong condemned = new AtomicLong();
    /** Connections with a frame in progress (their buffers reserved here); guarded by this. */
    private final Set<Reassembler> holders = new HashSet<>();
    private final AtomicLong victims = new AtomicLong();

    public ReassemblyBudget(long limit) {
        this.limit = limit;
    }

    /** Takes {@code bytes}; false (and nothing taken) when that would exceed the limit (plus the overdraft). */
    boolean tryReserve(long bytes) {
        return addWithin(used, bytes, limit + condemned.get());
    }

    void release(long bytes) {
        used.addAndGet(-bytes);
    }

    /** {@code r} began a fragmented frame. */
    synchronized void holding(Reassembler r) {
        holders.add(r);
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

    /** Whether a buffer of {@code bytes} may be kept for the next frame; if so it is counted as kept. */
    boolean keep(long bytes) {
        return used.get() <= limit / 2 && addWithin(kept, bytes, limit / 8);
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

    /** A kept buffer is in use again, or gone. */
    void unkeep(long bytes) {
        kept.addAndGet(-bytes);
    }

    /**
     * {@code asker} found the budget short: condemns the connection that holds more than its fair share and began its
     * frame the longest ago, if any, and lets the budget be overdrawn by what that connection holds. Returns whether
     * one was condemned.
     */
    synchronized boolean condemnSquatter(Reassembler asker) {
        int count = holders.size() + (holders.contains(asker) ? 0 : 1);
        long fairShare = limit / count;
        Reassembler victim = null;
        for (Reassembler r : holders) {
            if (r == asker || r.condemned()) {
                continue;
            }
            if (r.heldBytes() > fairShare && (victim == null || r.startedAt() - victim.startedAt() < 0)) {
                victim = r;
            }
        }
        if (victim == null) {
            return false;
        }
        long held = victim.condemn("its unfinished frame held " + victim.heldBytes() + " bytes of reassemblyMemory ("
                + limit + "), above the fair share of " + fairShare + " among the " + count + " connections "
                + "reassembling, and began the longest ago, when another connection needed room");
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
        return kept.get();
    }

    /** Connections failed to make room for others. */
    public long victims() {
        return victims.get();
    }

    long limit() {
        return limit;
    }
}
