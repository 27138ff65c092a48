package dev.artemisrdma.transport.loop;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.CompletionQueue;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.LogLimiter;
import dev.artemisrdma.transport.fabric.WcStatus;
import dev.artemisrdma.transport.flow.SharedReceivePool;
import dev.artemisrdma.transport.stats.LoopStats;
import dev.artemisrdma.transport.stats.PublishedCounters;
import dev.artemisrdma.transport.wire.WorkRequestIds;

/**
 * A thread that owns one completion queue on one device, shared by many channels. It polls completions in
 * batches, maps each back to its channel and slot through the work request id (channel index in the high 32 bits,
 * receive bit and slot below: no lookup structure, no allocation), then lets every channel the batch touched
 * apply it ({@link LoopChannel#endOfBatch}). Other threads do not change a channel's state themselves: they ask the
 * loop through the channel's {@link Mailbox} ({@link #post}), and the loop runs the requests at its next tick, or
 * ahead of the channel's next batch ({@link LoopChannel#runCommands}).
 *
 * <p>When idle it may spin (busy-poll) for a while, a window that {@link SpinPolicy} adapts between 0 and
 * {@code busyPollMicros} to whether spinning pays (or all of it, or none, as {@code busyPollMode} says), and only while the transport's {@link SpinBudget} (one core's
 * worth for all its loops) lasts; then it arms the completion channel, polls once more (a completion that came between the
 * last poll and the arming would otherwise raise no event) and blocks: for at most 100 ms while one of its channels
 * has a deadline running (connecting, closing, draining, frames queued or half reassembled), else for up to
 * {@value #IDLE_AWAIT_MILLIS} ms. Whoever gives a channel a deadline from another thread (a close, a failure, a
 * device event) or stops the loop ends that wait at once with {@link #wake} (an eventfd polled beside the completion
 * channel), so an idle loop costs no periodic wake-ups: with hundreds of idle connections, only their traffic (Artemis
 * pings) wakes it. After a timeout or a wake-up the channel, still armed, is not armed again. A completion that comes
 * while it is blocked wakes it at once (no timer ever holds one back). Spinning runs in native steps of at most {@value #STEP_MICROS} us,
 * sized from the measured cost of an empty poll, with a {@link Thread#yield} between steps so a runnable broker
 * thread on this core gets it. {@link #stats} counts what the loop did.
 *
 * <p>The queue is sized for the sum of what its channels can have outstanding: each channel reserves its receives
 * plus its send budget, and a loop that cannot fit another channel refuses it (overrunning a CQ is fatal).
 *
 * <p>Shared receive queue. A loop serving accepted connections with {@code sharedReceiveQueue} owns one
 * {@link SharedReceivePool} (why per loop: see there). Its receives are reserved on the queue once (each posted
 * receive completes at most once), and such a channel reserves only its send budget. A pool receive's work request
 * id names the pool slot, not the channel: the completion is mapped to its channel by the queue pair number it
 * carries. The slot is reposted in the batch that saw it, before the channels apply the batch and regrant its credit,
 * or held for a later post of up to 16 while the pool's spare covers it; a loop about to block posts what it holds.
 *
 * <p>Failure. Whatever ends the thread early (a failed poll, or any Throwable out of a channel's completion
 * handling) takes the loop out of service at once: it refuses new channels, tells its owner (which stops picking
 * it), and fails its channels with the cause: those with a queue pair are torn down there and then, since nobody
 * will poll their completions any more, and one still being set up is refused when it attaches. The queue itself is
 * destroyed only when the last channel has let go of it, so no queue pair is ever created on a freed queue.
 */
public final class CompletionLoop implements Runnable {

    private static final Logger LOG = LoggerFactory.getLogger(CompletionLoop.class);
    /**
     * A channel failing on its completions, ticks or writers' flushes: a bug, but one a peer can make happen with
     * every batch it sends or connection it opens, so limited per site (issue 37, hole 7).
     */
    private static final LogLimiter CHANNEL_FAILED = LogLimiter.site(LOG, Level.ERROR,
            "channels that failed in their loop (completions, writers' flushes, ticks, failing)");
    private static final int BATCH = 64;
    /** Empty polls retried in native code per busy-poll step: one JNI transition per completion, not per poll. */
    private static final int NATIVE_SPINS = 1024;
    /** The blocking wait's bound while a channel has a deadline running: its deadlines are checked this often. */
    private static final long AWAIT_MILLIS = 100;
    /**
     * The bound while no channel has a deadline running. Not needed for correctness (every thread that starts a
     * deadline calls {@link #wake}): a safety net that keeps a missed wake-up from holding a close for longer.
     */
    static final long IDLE_AWAIT_MILLIS = 10_000;
    private static final int CLOCK_EVERY = 64;
    private static final long TICK_NANOS = TimeUnit.MILLISECONDS.toNanos(20);
    /** Longest native spin step between yields. */
    private static final long STEP_MICROS = 20;
    private static final long STEP_NANOS = TimeUnit.MICROSECONDS.toNanos(STEP_MICROS);
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
    /** How long {@link #stop} waits for the thread: beyond its final drain's bound, so a sound loop is seen to end. */
    public static final long STOP_WAIT_MILLIS = 12_000;
    /** How long the final drain lets channels still closing finish (their drain deadlines are 5 s). */
    private static final long FINAL_DRAIN_MILLIS = 10_000;

    /** Marks an inbox that takes no more mailboxes: the thread has ended, or is ending (see {@link #closeInbox}). */
    private static final Mailbox INBOX_CLOSED = new Mailbox(null);

    /** Where a channel landed: its loop and its index there. */
    public record Assignment(CompletionLoop loop, int index) {
    }

    private final String name;
    private final FabricDevice device;
    private final int requestedEntries;
    private final SpinPolicy spinPolicy;
    private final SpinBudget spinBudget;
    /** Nanoseconds one empty native poll takes, learned from spins that found nothing. */
    private double nanosPerPoll = 100;
    // statistics: written by the loop thread only, read by monitoring (published, not fenced, per count)
    private static final int SPINS = 0;
    private static final int SPIN_HITS = 1;
    private static final int SPIN_NANOS = 2;
    private static final int BLOCKS = 3;
    private static final int WAKE_UPS = 4;
    private static final int BLOCKED_NANOS = 5;
    private final PublishedCounters statistics = new PublishedCounters(6);
    /** CPU time of the thread when it ended; -1 while it runs. */
    private volatile long finalCpuNanos = -1;
    /** True while the thread waits on the completion channel (tests look for an idle loop). */
    private volatile boolean blocked;
    /** The next blocking wait's bound: AWAIT_MILLIS while a channel has a deadline, else IDLE_AWAIT_MILLIS. */
    private long awaitMillis = AWAIT_MILLIS;
    /** Set by {@link #wake}: the loop ticks its channels before it waits again. */
    private volatile boolean tickRequested;
    /** A channel's batch left it with a deadline running since the last tick (loop thread only). */
    private boolean deadlineSeen;
    /**
     * True while the thread handles a batch of completions. A writer on another thread that flushes meanwhile leaves
     * the post to the loop ({@link #takeFlush}), which posts what queued on that channel in one list after the
     * batch: on rxe each post is a system call doing the packets' work, and a busy loop's one post for several
     * writes costs less than each writer's own (Netty's event loop writes what queued the same way). Set with a
     * release store ({@link #HANDLING}: no fence per batch), cleared with a volatile one: a writer that reads a stale
     * false only posts for itself, under the channel's lock, as when the loop is idle; the clear must be ordered
     * before the loop's last look at {@link #flushRequests} (see {@link #takeFlush}).
     */
    private volatile boolean handling;
    private static final VarHandle HANDLING;

    static {
        try {
            HANDLING = MethodHandles.lookup().findVarHandle(CompletionLoop.class, "handling", boolean.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }
    /**
     * Channels whose writers left their flush to the loop (see {@link #handling}): a stack of the channels' own
     * {@link FlushRequest}s, pushed with a compare-and-set and taken whole with one exchange, as the {@link #inbox};
     * nothing allocated per hand-off.
     */
    private final AtomicReference<FlushRequest> flushRequests = new AtomicReference<>();
    /**
     * The channels' mailboxes with requests for this thread (see {@link #post}): a stack that any thread pushes onto
     * with a compare-and-set and the loop thread takes whole with one exchange, then runs in the order the channels
     * asked (a stack is last-in-first-out: reversed first, so that two connections established one after the other
     * are opened, and their applications told, in that order); nothing is allocated per request. Each channel's
     * requests are bits it runs in its own order.
     */
    private final AtomicReference<Mailbox> inbox = new AtomicReference<>();
    private final Object registry = new Object();
    /** Freed indexes are reused last-in-last-out, so a stale completion is unlikely to find a new channel. */
    private final ArrayDeque<Integer> freeIndexes = new ArrayDeque<>();
    private AtomicReferenceArray<LoopChannel> channels;
    private LoopChannel[] touched;
    private int nextIndex;
    private int reservedEntries;
    private int registered;
    private CompletionQueue cq;
    private Thread thread;
    private volatile boolean running = true;
    /** Why the device failed the shared receive queue (see {@link #sharedPoolFailed}); null while it is sound. */
    private volatile String sharedPoolFailure;
    /** Why the loop died; null while it is in service. Set under {@link #registry}. */
    private volatile FabricException failure;
    private boolean queueClosed;
    private final TransportConfig config;
    /** Created with the first channel that shares receives; destroyed after its queue pairs, before the queue. */
    private volatile SharedReceivePool pool;
    /** Channels on the shared pool by queue pair number: its receive completions name no channel. */
    private final QueuePairTable byQueuePair = new QueuePairTable();
    /** Polls begun so far; see {@link #pollsBegun()} (loop thread only). */
    private long pollsBegun;
    /** The number of the latest poll that found the queue drained; see {@link #drainedSince} (loop thread only). */
    private long lastDrainedPoll;
    /**
     * Completed when the thread has left {@link #run} (its queue destroyed, unless the thread died with channels
     * still on it). What the thread may still touch (the device's send buffers, a failed loop's queue) is freed
     * only after this: never under a thread that has not exited.
     */
    private final java.util.concurrent.CompletableFuture<Void> exited = new java.util.concurrent.CompletableFuture<>();
    private final Consumer<CompletionLoop> onFailure;

    CompletionLoop(String name, FabricDevice device, TransportConfig config) {
        this(name, device, config, loop -> { });
    }

    /** {@code onFailure} runs on the dying thread, before the channels are failed: take the loop out of use. */
    CompletionLoop(String name, FabricDevice device, TransportConfig config, Consumer<CompletionLoop> onFailure) {
        this(name, device, config, onFailure, new SpinBudget());
    }

    /** {@code spinBudget}: shared by the loops of one transport. */
    public CompletionLoop(String name, FabricDevice device, TransportConfig config, Consumer<CompletionLoop> onFailure,
                          SpinBudget spinBudget) {
        this.name = name;
        this.spinBudget = spinBudget;
        this.device = device;
        this.onFailure = onFailure;
        int deviceMax = device.limits() == null || device.limits().maxCqe() <= 0
                ? Integer.MAX_VALUE : device.limits().maxCqe();
        this.requestedEntries = Math.min(config.completionQueueEntries(), deviceMax);
        this.config = config;
        this.spinPolicy = new SpinPolicy(TimeUnit.MICROSECONDS.toNanos(config.busyPollMicros()),
                config.busyPollMode());
    }

    /** Channels currently assigned here. */
    public int load() {
        synchronized (registry) {
            return registered;
        }
    }

    /**
     * Reserves {@code entries} completion queue entries for a channel; returns its index, or -1 when this loop's
     * queue cannot hold it or the loop has failed. Creates the queue and starts the thread on first use.
     */
    public int register(LoopChannel channel, int entries) throws FabricException {
        synchronized (registry) {
            if (failure != null) {
                return -1;
            }
            if (!running) {
                throw new FabricException("completion loop " + name + " is stopped");
            }
            if (cq == null) {
                cq = device.createCompletionQueue(requestedEntries);
                int maxChannels = Math.max(1, cq.capacity() / Math.max(1, entries));
                channels = new AtomicReferenceArray<>(maxChannels);
                touched = new LoopChannel[maxChannels];
                thread = new Thread(this, name);
                thread.setDaemon(true);
                thread.start();
                LOG.debug("{}: completion queue of {} entries on {}", name, cq.capacity(), device.name());
            }
            if (reservedEntries + entries > cq.capacity()) {
                return -1;
            }
            SharedReceivePool.Allocation allocation = null;
            if (channel.sharesReceives()) {
                if (pool == null) {
                    if (reservedEntries + config.sharedReceiveSlots() + entries > cq.capacity()) {
                        return -1; // this queue cannot take the pool's receives on top of what it holds
                    }
                    pool = SharedReceivePool.create(name + "-srq", device, config);
                    pool.queue().onFailure(this::sharedPoolFailed);
                    reservedEntries += pool.slots();
                }
                allocation = pool.admit(channel.sharedWindowGrows());
                if (allocation == null) {
                    if (pool.recallWanted()) {
                        wake(); // grown windows are recalled at the loop's next tick, for the connections after this
                    }
                    return -1; // every receive of the pool is promised: another loop (and pool) takes it
                }
            }
            int index;
            if (!freeIndexes.isEmpty()) {
                index = freeIndexes.pollFirst();
            } else if (nextIndex < channels.length()) {
                index = nextIndex++;
            } else {
                if (allocation != null) {
                    pool.release(allocation);
                }
                return -1;
            }
            if (allocation != null) {
                channel.useSharedPool(pool, allocation);
            }
            reservedEntries += entries;
            registered++;
            channels.set(index, channel);
            return index;
        }
    }

    public void unregister(int index, int entries) {
        synchronized (registry) {
            if (channels.get(index) != null) {
                channels.set(index, null);
                freeIndexes.addLast(index);
                reservedEntries -= entries;
                registered--;
            }
            closeQueueIfAbandonedLocked();
        }
    }

    /** A channel on the shared pool has its queue pair: its receive completions are found by this number. */
    public void mapQueuePair(int qpNumber, LoopChannel channel) {
        byQueuePair.put(qpNumber, channel);
    }

    /** The channel's queue pair is destroyed; a late completion of that number finds nothing. */
    public void unmapQueuePair(int qpNumber, LoopChannel channel) {
        byQueuePair.remove(qpNumber, channel);
    }

    /** The loop's shared receive pool, or null before the first channel that shares receives. */
    public SharedReceivePool sharedPool() {
        return pool;
    }

    /** Why this loop died, or null while it is in service. A channel not yet attached must not use its queue. */
    public FabricException failure() {
        return failure;
    }

    /**
     * A failed loop's queue goes once no channel holds a place on it: none can create a queue pair on it then. It is
     * destroyed by the loop's thread as it exits, or here if that has exited already (a channel released later, on
     * another thread): the queue's owner is the thread, never a bystander.
     */
    private void closeQueueIfAbandonedLocked() {
        if (failure != null && registered == 0 && cq != null && !queueClosed) {
            queueClosed = true;
            CompletionQueue q = cq;
            whenExited(() -> {
                closePool();
                q.close();
                LOG.info("{}: completion queue of the failed loop destroyed", name);
            });
        }
    }

    /**
     * Runs {@code action} once the thread has left {@link #run}: on that thread as it exits, or at once on this one
     * if it has (or never started).
     */
    public void whenExited(Runnable action) {
        Thread t;
        synchronized (registry) {
            t = thread;
        }
        if (t == null) {
            action.run();
            return;
        }
        exited.whenComplete((v, e) -> {
            try {
                action.run();
            } catch (RuntimeException | Error x) {
                LOG.error("{}: releasing after the loop's thread exited failed", name, x);
            }
        });
    }

    public CompletionQueue completionQueue() {
        synchronized (registry) {
            return cq;
        }
    }

    public boolean isLoopThread() {
        return Thread.currentThread() == thread;
    }

    /** Tells the thread to stop, without waiting: its current wait ends at once. */
    public void requestStop() {
        synchronized (registry) {
            running = false;
        }
        wake();
    }

    /**
     * Ends the loop's blocking wait (or its next one) and has it tick its channels first: called by whoever starts a
     * deadline on a channel from another thread. Cheap enough for rare events (one eventfd write), not for the
     * data path.
     */
    public void wake() {
        tickRequested = true;
        CompletionQueue q;
        synchronized (registry) {
            q = queueClosed ? null : cq;
        }
        if (q != null) {
            q.wakeUp();
        }
    }

    /**
     * Queues {@code mailbox}, which {@link Mailbox#add} has just marked queued, for this loop's thread, which runs its
     * requests at its next tick ({@link LoopChannel#runCommands}), and wakes the thread. Returns false when the loop
     * takes no more requests (its thread has ended, or is ending and has run what it was given): the caller then runs
     * them itself ({@link Mailbox#takeAll}). Any thread; once per mailbox queued, so cheap enough for rare events
     * (rdma_cm's, a deadline, a close), not for the data path.
     */
    public boolean post(Mailbox mailbox) {
        for (;;) {
            Mailbox head = inbox.get();
            if (head == INBOX_CLOSED) {
                return false;
            }
            mailbox.next = head;
            if (inbox.compareAndSet(head, mailbox)) {
                break;
            }
        }
        wake();
        return true;
    }

    /** Runs the requests in the inbox (loop thread); returns whether a channel has a deadline running after them. */
    private boolean runInbox() {
        Mailbox head = inbox.get();
        if (head == null || head == INBOX_CLOSED) {
            return false;
        }
        return runRequests(inbox.getAndSet(null)); // only this thread closes the inbox: it is not closed now
    }

    /** The inbox takes no more mailboxes; what it held runs now (loop thread, as it ends or dies). */
    private void closeInbox() {
        Mailbox head = inbox.getAndSet(INBOX_CLOSED);
        if (head != INBOX_CLOSED) {
            runRequests(head);
        }
    }

    private boolean runRequests(Mailbox newestFirst) {
        boolean pending = false;
        Mailbox m = inArrivalOrder(newestFirst);
        while (m != null) {
            Mailbox next = m.next;
            m.next = null; // before takeAll: from then on another thread may queue it again
            int requests = m.takeAll();
            if (requests != 0) {
                try {
                    pending |= m.owner().runCommands(requests);
                } catch (RuntimeException e) {
                    pending = true;
                    if (CHANNEL_FAILED.admit()) {
                        LOG.error("{}: channel {} failed on the requests of other threads", name, m.owner().id(), e);
                    }
                }
            }
            m = next;
        }
        return pending;
    }

    /** Reverses the stack taken from the inbox (loop thread: every mailbox in it is marked queued, so none moves). */
    private static Mailbox inArrivalOrder(Mailbox newestFirst) {
        Mailbox oldestFirst = null;
        Mailbox m = newestFirst;
        while (m != null) {
            Mailbox next = m.next;
            m.next = oldestFirst;
            oldestFirst = m;
            m = next;
        }
        return oldestFirst;
    }

    /**
     * The device failed this loop's shared receive queue (IBV_EVENT_SRQ_ERR): its connections' peers may send into a
     * queue with no receive and retry for ever, so the loop dies at its next poll and fails them all with the
     * reason; new connections get a fresh loop and pool. Called on the device's event thread.
     */
    private void sharedPoolFailed(String reason) {
        sharedPoolFailure = reason;
        wake();
    }

    /**
     * Stops the thread, which closes the completion queue; channels must be closed first. Waits up to
     * {@link #STOP_WAIT_MILLIS} for it; returns whether it has exited. A thread still running (stuck in a handler,
     * or its channels still draining) goes on, and what it may touch must be freed through {@link #whenExited}.
     */
    public boolean stop() {
        return stop(STOP_WAIT_MILLIS);
    }

    /** As {@link #stop()}, waiting up to {@code waitMillis}. */
    public boolean stop(long waitMillis) {
        Thread t;
        synchronized (registry) {
            running = false;
            t = thread;
        }
        if (t == null) {
            return true;
        }
        wake();
        if (t == Thread.currentThread()) {
            return false;
        }
        try {
            t.join(waitMillis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (t.isAlive()) {
            LOG.warn("{}: did not stop within {} ms; its queue and the memory it may touch are released when it does",
                    name, waitMillis);
            return false;
        }
        return true;
    }

    @Override
    public void run() {
        Completions batch = new Completions(BATCH);
        long lastTick = System.nanoTime();
        try {
            int busyBatches = 0;
            while (running) {
                int n = pollOnce(batch, 1);
                // a busy loop reads the clock every CLOCK_EVERY batches only: the ticks it drives are 20 ms apart
                if (n > 0 && ++busyBatches < CLOCK_EVERY) {
                    continue;
                }
                busyBatches = 0;
                long now = System.nanoTime();
                if (now - lastTick > TICK_NANOS || tickRequested) {
                    lastTick = now;
                    tickAndSetAwait(now);
                }
                if (n > 0) {
                    continue;
                }
                long idleSince = now;
                long window = spinPolicy.window();
                if (window > 0 && spinBudget.allows(now) && spin(batch, now, window) > 0) {
                    spinPolicy.caught(System.nanoTime() - idleSince);
                    continue;
                }
                if (deadlineSeen) {
                    // what was just handled started a deadline (or one still runs): the short wait, whose timeout
                    // ticks every channel; an idle loop's handled traffic (a ping) costs no tick of them all
                    deadlineSeen = false;
                    awaitMillis = AWAIT_MILLIS;
                }
                SharedReceivePool shared = pool;
                if (shared != null) {
                    shared.repostHeld(); // going idle: the receives a busy loop held back are posted now
                }
                cq.requestNotification();
                if (pollOnce(batch, 1) > 0) {
                    // arrived before the arming: handled now; the armed event wakes a later wait
                    spinPolicy.missed(System.nanoTime() - idleSince, true);
                    continue;
                }
                boolean woken = block();
                while (!woken && running) {
                    // the timeout or a wake-up: the channel is still armed (no event came), so look at the
                    // deadlines, poll once (a failed queue shows there) and wait again without arming anew
                    lastTick = System.nanoTime();
                    spinPolicy.missed(lastTick - idleSince, false);
                    tickAndSetAwait(lastTick);
                    if (pollOnce(batch, 1) > 0) {
                        woken = true; // its event, already raised, ends a later wait at once
                        break;
                    }
                    woken = block();
                }
                spinPolicy.missed(System.nanoTime() - idleSince, woken);
            }
        } catch (Throwable e) {
            finalCpuNanos = THREADS.getCurrentThreadCpuTime();
            try {
                fail(e);
            } finally {
                exited.complete(null);
            }
            return;
        }
        try {
            drainAndClose(batch);
            finalCpuNanos = THREADS.getCurrentThreadCpuTime();
        } finally {
            exited.complete(null);
        }
    }

    /**
     * Busy-polls for up to {@code window} ns from {@code start}, in native steps of at most {@link #STEP_NANOS}
     * with a yield between them; returns the completions found (0: the window passed, or the loop stops).
     */
    private int spin(Completions batch, long start, long window) throws FabricException {
        statistics.increment(SPINS);
        long now = start;
        int n = 0;
        while (running) {
            long left = Math.min(STEP_NANOS, window - (now - start));
            int steps = (int) Math.max(1, Math.min(NATIVE_SPINS, left / nanosPerPoll));
            long stepStart = now;
            n = pollOnce(batch, steps);
            now = System.nanoTime();
            if (n > 0) {
                statistics.increment(SPIN_HITS);
                break;
            }
            nanosPerPoll = Math.max(1, 0.75 * nanosPerPoll + 0.25 * (now - stepStart) / steps);
            if (now - start >= window) {
                break;
            }
            Thread.yield(); // a runnable thread on this core goes first; returns at once when there is none
        }
        statistics.add(SPIN_NANOS, now - start);
        spinBudget.charge(now - start);
        return n;
    }

    /** Ticks every channel and bounds the next blocking wait by whether any has a deadline running. */
    private void tickAndSetAwait(long now) {
        tickRequested = false; // before the tick: a wake() during it ticks again
        deadlineSeen = false;
        awaitMillis = tick(now) ? AWAIT_MILLIS : IDLE_AWAIT_MILLIS;
    }

    /** Waits on the armed completion channel; true when a completion woke it, false on the timeout or a wake(). */
    private boolean block() throws FabricException {
        statistics.increment(BLOCKS);
        blocked = true;
        long start = System.nanoTime();
        boolean woken;
        try {
            woken = cq.awaitNotification(running ? awaitMillis : 0);
        } finally {
            blocked = false;
        }
        statistics.add(BLOCKED_NANOS, System.nanoTime() - start);
        if (woken) {
            statistics.increment(WAKE_UPS);
        }
        return woken;
    }

    /** What this loop did so far (the spin budget's count is the transport's, left 0 here). */
    public LoopStats stats() {
        Thread t;
        synchronized (registry) {
            t = thread;
        }
        long cpu = finalCpuNanos;
        if (cpu < 0) {
            cpu = t == null ? 0 : THREADS.getThreadCpuTime(t.getId());
            if (cpu < 0 && t != null && !t.isAlive()) {
                cpu = Math.max(0, finalCpuNanos); // ended between the two reads
            }
        }
        return new LoopStats(t == null ? 0 : 1, statistics.get(SPINS), statistics.get(SPIN_HITS),
                statistics.get(SPIN_NANOS), statistics.get(BLOCKS), statistics.get(WAKE_UPS),
                statistics.get(BLOCKED_NANOS), cpu, 0);
    }

    /** Whether the loop thread is handling a batch now, so that it will look at {@link #takeFlush} requests. */
    public boolean handling() {
        return handling;
    }

    /**
     * Leaves a channel's flush to the loop ({@code request}, the channel's own); true when the loop is sure to see it,
     * false when it finished its batch meanwhile and the caller must flush itself (a request the loop then finds has
     * nothing to post). The request goes in before {@link #handling} is read again, and the loop clears
     * {@code handling} before it looks at the requests a last time: one of the two sees the other.
     */
    public boolean takeFlush(FlushRequest request) {
        if (request.queued.compareAndSet(false, true)) {
            for (;;) {
                FlushRequest head = flushRequests.get();
                request.next = head;
                if (flushRequests.compareAndSet(head, request)) {
                    break;
                }
            }
        } // else already in the stack: the loop's post for it takes the channel's lock after this writer
        return handling;
    }

    /** Whether the thread is blocked on the completion channel now. */
    boolean isBlocked() {
        return blocked;
    }

    /**
     * Whether the thread is blocked in the long wait of a loop with no deadline running, which only a completion or
     * a {@link #wake()} ends before {@link #IDLE_AWAIT_MILLIS}: tests that need the loop to stay out of the way.
     */
    boolean isBlockedIdle() {
        return blocked && awaitMillis == IDLE_AWAIT_MILLIS; // awaitMillis is written before the volatile blocked
    }

    /** The spin window the next idle period would use, in ns. */
    long spinWindowNanos() {
        return spinPolicy.window();
    }

    /** Out of service at once, the owner told, every channel failed with the cause; the queue goes last. */
    private void fail(Throwable e) {
        FabricException why = new FabricException("completion loop " + name + " on " + device.name() + " failed: "
                + e, e);
        int channelCount;
        synchronized (registry) {
            failure = why;
            channelCount = registered;
        }
        LOG.error("{}: completion loop on {} died; taken out of service, failing its {} connections", name,
                device.name(), channelCount, e);
        // first, before the owner hears of it: what other threads asked of the channels before the loop died runs
        // with its own cause (a handshake deadline, a close), as on a loop that is gone; from now on they run it
        closeInbox();
        try {
            onFailure.accept(this);
        } catch (RuntimeException | Error t) {
            LOG.error("{}: removing the failed loop from service failed", name, t);
        }
        releaseChannels(why);
        synchronized (registry) {
            closeQueueIfAbandonedLocked();
        }
    }

    /** Nobody polls for the channels still here any more: each is failed with {@code why} and released now. */
    private void releaseChannels(FabricException why) {
        for (int i = 0, n = channels.length(); i < n; i++) {
            LoopChannel ch = channels.get(i);
            if (ch != null) {
                try {
                    ch.loopFailed(why);
                } catch (RuntimeException | Error t) {
                    if (CHANNEL_FAILED.admit()) {
                        LOG.error("{}: failing channel {} failed", name, ch.id(), t);
                    }
                }
            }
        }
    }

    /** One poll of up to a batch; dispatches, then lets each channel touched apply what it got. */
    private int pollOnce(Completions batch, int spins) throws FabricException {
        String poolFailure = sharedPoolFailure;
        if (poolFailure != null) {
            throw new FabricException(poolFailure); // the loop dies and fails its connections (see fail)
        }
        long poll = ++pollsBegun;
        int n = spins > 1 ? cq.pollSpinning(batch, spins) : cq.poll(batch);
        if (n == 0) {
            lastDrainedPoll = poll;
            return 0;
        }
        HANDLING.setRelease(this, true);
        try {
            handleBatch(batch, n);
            if (n < batch.capacity()) {
                lastDrainedPoll = poll; // the queue held no more than this: all it held when the poll began is handled
            }
            return n;
        } finally {
            flushForWriters();
            handling = false;
            flushForWriters(); // requests that came between the last look and the clear (one read when none did)
        }
    }

    /** Posts what writers left to the loop while it handled a batch (see {@link #handling}). */
    private void flushForWriters() {
        if (flushRequests.get() == null) {
            return; // one volatile read after a batch no writer touched
        }
        // taken whole and reversed: the channels are posted for in the order their writers asked
        FlushRequest r = null;
        for (FlushRequest m = flushRequests.getAndSet(null); m != null; ) {
            FlushRequest next = m.next;
            m.next = r;
            r = m;
            m = next;
        }
        while (r != null) {
            FlushRequest next = r.next;
            r.next = null; // before the mark goes: from then on a writer may push it again
            // a release store, no fence: a writer that still reads the mark set leaves its frames to the post below,
            // which takes the channel's lock (a full fence) after that writer lets it go
            r.queued.setRelease(false);
            LoopChannel ch = r.channel;
            r = next;
            try {
                deadlineSeen |= ch.flushLeftToLoop();
            } catch (RuntimeException e) {
                deadlineSeen = true;
                if (CHANNEL_FAILED.admit()) {
                    LOG.error("{}: channel {} failed to post what its writers queued", name, ch.id(), e);
                }
            }
        }
    }

    private void handleBatch(Completions batch, int n) throws FabricException {
        int touchedCount = 0;
        SharedReceivePool shared = pool;
        for (int i = 0; i < n; i++) {
            long wrId = batch.wrId(i);
            int index = WorkRequestIds.channelIndex(wrId);
            if (index == WorkRequestIds.SHARED_POOL_INDEX && shared != null) {
                int slot = WorkRequestIds.slot(wrId);
                shared.consumed(slot); // reposted below, whatever became of its connection
                LoopChannel ch = byQueuePair.get(batch.qpNumber(i));
                int base = shared.base(slot);
                if (ch == null || base < 0) {
                    LOG.debug("{}: shared receive for a closed queue pair {} ({}) reposted", name,
                            batch.qpNumber(i), WcStatus.name(batch.status(i)));
                    continue;
                }
                if (ch.joinBatch()) {
                    touched[touchedCount++] = ch;
                }
                ch.counters().completed(batch.status(i));
                ch.onSharedReceiveCompletion(shared.view(), base, batch.status(i), batch.byteLength(i),
                        batch.immediate(i));
                continue;
            }
            LoopChannel ch = index < channels.length() ? channels.get(index) : null;
            int qpn = batch.qpNumber(i);
            // the queue pair number guards against a late completion of a closed channel whose index was reused
            // (0 is never an RC queue pair: a fabric that does not report it skips the check)
            if (ch == null || (qpn != 0 && ch.qpNumber() != qpn)) {
                LOG.debug("{}: completion for a closed channel (wr_id {}, {}) ignored", name,
                        Long.toHexString(wrId), WcStatus.name(batch.status(i)));
                continue;
            }
            if (ch.joinBatch()) {
                touched[touchedCount++] = ch;
            }
            ch.counters().completed(batch.status(i));
            int slot = WorkRequestIds.slot(wrId);
            if (WorkRequestIds.isReceive(wrId)) {
                ch.onReceiveCompletion(slot, batch.status(i), batch.byteLength(i), batch.immediate(i));
            } else {
                ch.onSendCompletion(slot, batch.status(i));
            }
        }
        if (shared != null) {
            shared.repostConsumed(); // before any channel grants the credit of a consumed slot again
        }
        for (int i = 0; i < touchedCount; i++) {
            LoopChannel ch = touched[i];
            touched[i] = null;
            ch.leaveBatch();
            try {
                deadlineSeen |= ch.endOfBatch();
            } catch (RuntimeException e) {
                deadlineSeen = true;
                if (CHANNEL_FAILED.admit()) {
                    LOG.error("{}: channel {} failed to process completions", name, ch.id(), e);
                }
            }
        }
        if (shared != null && shared.recallWanted()) {
            deadlineSeen = true; // a grant or a refused growth asked for a recall: the loop's next ticks run it
        }
    }

    /**
     * Polls begun so far, the one being handled included (loop thread only): a channel on the shared pool takes it as
     * the fence of its drain, then waits for {@link #drainedSince} that fence.
     */
    public long pollsBegun() {
        return pollsBegun;
    }

    /**
     * Whether a poll that began after poll number {@code fence} found the queue drained and has been handled (loop
     * thread only). A channel on the shared pool has no receives of its own to be flushed at teardown: this proves
     * instead that the receive completions its peer's last SENDs produced (queued before the disconnect could be seen)
     * were handled. A poll that began before the fence proves nothing, even if it ends after it.
     */
    public boolean drainedSince(long fence) {
        return lastDrainedPoll > fence;
    }

    /**
     * Runs what other threads asked of the channels ({@link #post}), then ticks the shared pool and every channel,
     * and recalls grown windows when the pool asks; returns whether any has a
     * deadline running or work pending.
     */
    private boolean tick(long now) {
        boolean pending = runInbox(); // first: a close or an event asked for since the last tick is ticked at once
        SharedReceivePool shared = pool;
        boolean recall = false;
        if (shared != null) {
            recall = shared.recallDue(now);
            pending = shared.tick(now); // credits of closed connections wait out their quarantine; a recall to come
        }
        for (int i = 0, n = channels.length(); i < n; i++) {
            LoopChannel ch = channels.get(i);
            if (ch != null) {
                try {
                    if (recall) {
                        ch.recall(shared.minimum());
                    }
                    pending |= ch.tick(now);
                } catch (RuntimeException e) {
                    pending = true;
                    if (CHANNEL_FAILED.admit()) {
                        LOG.error("{}: channel {} failed on tick", name, ch.id(), e);
                    }
                }
            }
        }
        return pending;
    }

    /** Lets channels still closing finish (their drain deadlines bound it), then closes the queue. */
    private void drainAndClose(Completions batch) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(FINAL_DRAIN_MILLIS);
        try {
            while (load() > 0 && System.nanoTime() - deadline < 0) {
                if (pollOnce(batch, 1) == 0) {
                    Thread.sleep(1);
                    tick(System.nanoTime());
                }
            }
        } catch (FabricException | RuntimeException e) {
            LOG.debug("{}: final drain failed", name, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        // what other threads asked runs now, before the channels still here are released; from now on they run it
        closeInbox();
        int left = load();
        if (left > 0) {
            // nobody will poll for them any more: released here and now, as when a loop dies, so that the queue and
            // the pool go with no queue pair left on them
            LOG.warn("{}: {} channels still open when the loop stopped; releasing them", name, left);
            releaseChannels(new FabricException("completion loop " + name + " stopped with the connection still open"));
        }
        if (load() > 0) {
            LOG.error("{}: {} channels could not be released; their completion queue is kept", name, load());
            return;
        }
        closePool();
        cq.close();
    }

    /** The pool's queue pairs are destroyed (or abandoned with the loop): the SRQ, then its memory. */
    private void closePool() {
        SharedReceivePool p = pool;
        if (p != null) {
            try {
                p.close();
            } catch (RuntimeException e) {
                LOG.error("{}: destroying the shared receive queue failed", name, e);
            }
        }
    }

    @Override
    public String toString() {
        return name;
    }
}
