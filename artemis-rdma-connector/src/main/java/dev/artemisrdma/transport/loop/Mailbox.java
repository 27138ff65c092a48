package dev.artemisrdma.transport.loop;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * One channel's requests to its completion loop, and its place in the loop's inbox: Aeron's command queue without a
 * command object per request. A request is a bit the channel defines (rdma_cm's ESTABLISHED, a close, ...); what it
 * carries (a reason, a deadline) the channel keeps beside it. Any thread {@link #add}s requests; the first to add
 * one while the mailbox is not queued queues it ({@link CompletionLoop#post}), so a mailbox is in an inbox at most
 * once, and asking allocates nothing. The loop takes all its requests at once and hands them to the channel
 * ({@link LoopChannel#runCommands}); two asks of the same request before the loop looks are one request.
 *
 * <p>Threads: {@link #add} and {@link #pending} any thread; {@link #takeAll} whoever holds the mailbox out of an
 * inbox (the loop thread that took it from its inbox, or a thread whose post the loop refused); {@link #take} the
 * loop thread running the requests before their turn in the inbox. {@link #next} is the inbox's link: written by the
 * thread that queues the mailbox, before the compare-and-set that publishes it, and read by the loop thread after
 * the exchange that took the list.
 */
public final class Mailbox {

    /** Queued in an inbox, or about to be, or held out of one by the thread that will run its requests. */
    private static final int QUEUED = 1 << 31;

    private final LoopChannel owner;
    private final AtomicInteger state = new AtomicInteger();
    /** The inbox's link (see the class comment). */
    Mailbox next;

    public Mailbox(LoopChannel owner) {
        this.owner = owner;
    }

    LoopChannel owner() {
        return owner;
    }

    /**
     * Adds {@code requests} (bits 0 to 30). Returns true when this call marked the mailbox queued: the caller must
     * then have it run, by {@link CompletionLoop#post} or, where the loop refuses it or there is none, by
     * {@link #takeAll} and running the requests itself. False: another thread holds it queued, and whoever runs its
     * requests next runs these too.
     */
    public boolean add(int requests) {
        if (requests == 0 || (requests & QUEUED) != 0) {
            throw new IllegalArgumentException("requests must be bits 0 to 30: " + Integer.toHexString(requests));
        }
        for (;;) {
            int s = state.get();
            if (state.compareAndSet(s, s | requests | QUEUED)) {
                return (s & QUEUED) == 0;
            }
        }
    }

    /** Whether requests wait to be run; any thread (one volatile read). */
    public boolean pending() {
        return (state.get() & ~QUEUED) != 0;
    }

    /** Takes the requests, leaving the queued mark as it is: the loop thread, ahead of the inbox. */
    public int take() {
        for (;;) {
            int s = state.get();
            if ((s & ~QUEUED) == 0 || state.compareAndSet(s, s & QUEUED)) {
                return s & ~QUEUED;
            }
        }
    }

    /** Takes the requests and the queued mark: the mailbox is out of every inbox, and the next add queues it again. */
    public int takeAll() {
        return state.getAndSet(0) & ~QUEUED;
    }

    @Override
    public String toString() {
        return "Mailbox[" + (owner == null ? "-" : owner.id()) + " " + Integer.toHexString(state.get()) + "]";
    }
}
