package dev.artemisrdma.transport;

import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A thread that owns one completion queue on one device, shared by many channels. It polls completions in
 * batches, maps each back to its channel and slot through the work request id (channel index in the high 32 bits,
 * receive bit and slot below: no lookup structure, no allocation), then lets every channel the batch touched
 * apply it ({@link RdmaChannelImpl#endOfBatch}).
 *
 * <p>When idle it spins for {@code busyPollMicros} (a completion within that window costs no wake-up), then arms
 * the completion channel, polls once more (a completion that came between the last poll and the arming would
 * otherwise raise no event) and blocks for at most 100 ms, so it notices a stop request and closing deadlines.
 *
 * <p>The queue is sized for the sum of what its channels can have outstanding: each channel reserves its receives
 * plus its send budget, and a loop that cannot fit another channel refuses it (overrunning a CQ is fatal).
 */
final class CompletionLoop implements Runnable {

    private static final Logger LOG = LoggerFactory.getLogger(CompletionLoop.class);
    private static final int BATCH = 64;
    /** Empty polls retried in native code per busy-poll step: one JNI transition per completion, not per poll. */
    private static final int NATIVE_SPINS = 1024;
    private static final long AWAIT_MILLIS = 100;
    private static final int CLOCK_EVERY = 64;
    private static final long TICK_NANOS = TimeUnit.MILLISECONDS.toNanos(20);

    /** Where a channel landed: its loop and its index there. */
    record Assignment(CompletionLoop loop, int index) {
    }

    private final String name;
    private final FabricDevice device;
    private final int requestedEntries;
    private final long busyPollNanos;
    private final Object registry = new Object();
    /** Freed indexes are reused last-in-last-out, so a stale completion is unlikely to find a new channel. */
    private final ArrayDeque<Integer> freeIndexes = new ArrayDeque<>();
    private AtomicReferenceArray<RdmaChannelImpl> channels;
    private RdmaChannelImpl[] touched;
    private int nextIndex;
    private int reservedEntries;
    private int registered;
    private CompletionQueue cq;
    private Thread thread;
    private volatile boolean running = true;

    CompletionLoop(String name, FabricDevice device, TransportConfig config) {
        this.name = name;
        this.device = device;
        int deviceMax = device.limits() == null || device.limits().maxCqe() <= 0
                ? Integer.MAX_VALUE : device.limits().maxCqe();
        this.requestedEntries = Math.min(config.completionQueueEntries(), deviceMax);
        this.busyPollNanos = TimeUnit.MICROSECONDS.toNanos(config.busyPollMicros());
    }

    /** Channels currently assigned here. */
    int load() {
        synchronized (registry) {
            return registered;
        }
    }

    /**
     * Reserves {@code entries} completion queue entries for a channel; returns its index, or -1 when this loop's
     * queue cannot hold it. Creates the queue and starts the thread on first use.
     */
    int register(RdmaChannelImpl channel, int entries) throws FabricException {
        synchronized (registry) {
            if (!running) {
                throw new FabricException("completion loop " + name + " is stopped");
            }
            if (cq == null) {
                cq = device.createCompletionQueue(requestedEntries);
                int maxChannels = Math.max(1, cq.capacity() / Math.max(1, entries));
                channels = new AtomicReferenceArray<>(maxChannels);
                touched = new RdmaChannelImpl[maxChannels];
                thread = new Thread(this, name);
                thread.setDaemon(true);
                thread.start();
                LOG.debug("{}: completion queue of {} entries on {}", name, cq.capacity(), device.name());
            }
            if (reservedEntries + entries > cq.capacity()) {
                return -1;
            }
            int index;
            if (!freeIndexes.isEmpty()) {
                index = freeIndexes.pollFirst();
            } else if (nextIndex < channels.length()) {
                index = nextIndex++;
            } else {
                return -1;
            }
            reservedEntries += entries;
            registered++;
            channels.set(index, channel);
            return index;
        }
    }

    void unregister(int index, int entries) {
        synchronized (registry) {
            if (channels.get(index) != null) {
                channels.set(index, null);
                freeIndexes.addLast(index);
                reservedEntries -= entries;
                registered--;
            }
        }
    }

    CompletionQueue completionQueue() {
        synchronized (registry) {
            return cq;
        }
    }

    boolean isLoopThread() {
        return Thread.currentThread() == thread;
    }

    /** Stops the thread, which closes the completion queue; channels must be closed first. */
    void stop() {
        Thread t;
        synchronized (registry) {
            running = false;
            t = thread;
        }
        if (t == null) {
            return;
        }
        if (t != Thread.currentThread()) {
            try {
                t.join(TimeUnit.SECONDS.toMillis(5));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (t.isAlive()) {
                LOG.warn("{}: did not stop within 5 s", name);
            }
        }
    }

    @Override
    public void run() {
        Completions batch = new Completions(BATCH);
        long lastTick = System.nanoTime();
        long idleSince = 0;
        boolean spinning = false;
        try {
            int busyBatches = 0;
            while (running) {
                int n = pollOnce(batch, busyPollNanos > 0 ? NATIVE_SPINS : 1);
                // a busy loop reads the clock every CLOCK_EVERY batches only: the ticks it drives are 20 ms apart
                if (n > 0 && ++busyBatches < CLOCK_EVERY) {
                    spinning = false;
                    continue;
                }
                busyBatches = 0;
                long now = System.nanoTime();
                if (now - lastTick > TICK_NANOS) {
                    lastTick = now;
                    tick(now);
                }
                if (n > 0) {
                    spinning = false;
                    continue;
                }
                if (busyPollNanos > 0) {
                    if (!spinning) {
                        spinning = true;
                        idleSince = now;
                    }
                    if (now - idleSince < busyPollNanos) {
                        continue;
                    }
                }
                spinning = false;
                cq.requestNotification();
                if (pollOnce(batch, 1) > 0) {
                    continue; // arrived before the arming: handled now; the armed event wakes a later wait
                }
                if (!cq.awaitNotification(AWAIT_MILLIS)) {
                    lastTick = System.nanoTime();
                    tick(lastTick);
                }
            }
        } catch (FabricException | RuntimeException | Error e) {
            LOG.error("{}: completion loop on {} failed; its channels can no longer complete work", name,
                    device.name(), e);
            failAll(e);
        } finally {
            drainAndClose(batch);
        }
    }

    /** One poll of up to a batch; dispatches, then lets each channel touched apply what it got. */
    private int pollOnce(Completions batch, int spins) throws FabricException {
        int n = spins > 1 ? cq.pollSpinning(batch, spins) : cq.poll(batch);
        if (n == 0) {
            return 0;
        }
        int touchedCount = 0;
        for (int i = 0; i < n; i++) {
            long wrId = batch.wrId(i);
            int index = (int) (wrId >>> 32);
            RdmaChannelImpl ch = index < channels.length() ? channels.get(index) : null;
            int qpn = batch.qpNumber(i);
            // the queue pair number guards against a late completion of a closed channel whose index was reused
            // (0 is never an RC queue pair: a fabric that does not report it skips the check)
            if (ch == null || (qpn != 0 && ch.qpNumber() != qpn)) {
                LOG.debug("{}: completion for a closed channel (wr_id {}, {}) ignored", name,
                        Long.toHexString(wrId), WcStatus.name(batch.status(i)));
                continue;
            }
            if (!ch.touched) {
                ch.touched = true;
                touched[touchedCount++] = ch;
            }
            ch.counters.completed(batch.status(i));
            int slot = (int) (wrId & 0x7FFFFFFFL);
            if ((wrId & RdmaChannelImpl.RECV_BIT) != 0) {
                ch.onReceiveCompletion(slot, batch.status(i), batch.byteLength(i));
            } else {
                ch.onSendCompletion(slot, batch.status(i));
            }
        }
        for (int i = 0; i < touchedCount; i++) {
            RdmaChannelImpl ch = touched[i];
            touched[i] = null;
            ch.touched = false;
            try {
                ch.endOfBatch();
            } catch (RuntimeException e) {
                LOG.error("{}: channel {} failed to process completions", name, ch.id(), e);
            }
        }
        return n;
    }

    private void tick(long now) {
        for (int i = 0, n = channels.length(); i < n; i++) {
            RdmaChannelImpl ch = channels.get(i);
            if (ch != null) {
                try {
                    ch.tick(now);
                } catch (RuntimeException e) {
                    LOG.error("{}: channel {} failed on tick", name, ch.id(), e);
                }
            }
        }
    }

    private void failAll(Throwable e) {
        for (int i = 0, n = channels.length(); i < n; i++) {
            RdmaChannelImpl ch = channels.get(i);
            if (ch != null) {
                ch.forceClose();
            }
        }
    }

    /** Lets channels still closing finish (their drain deadlines bound it), then closes the queue. */
    private void drainAndClose(Completions batch) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
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
        if (load() > 0) {
            LOG.warn("{}: {} channels still open when the loop stopped", name, load());
        }
        cq.close();
    }

    @Override
    public String toString() {
        return name;
    }
}
