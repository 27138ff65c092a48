package dev.artemisrdma.transport.verbs;

import dev.artemisrdma.transport.fabric.LogLimiter;
import dev.artemisrdma.transport.fabric.SourceAddresses;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

import java.net.InetAddress;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Destroys the rdma_cm ids of closed connections on threads of its own, so that no completion loop and no closer
 * waits in rdma_destroy_id.
 *
 * <p>Why: rdma_destroy_id returns only when the kernel's connection manager let go of the id, and that waits for the
 * CM messages still in flight for it. A DREQ that the peer never answers is retried until it times out: the lab saw
 * a completion loop held there for 72 s, with the 128 other connections of that loop unserved. The queue pair itself
 * is destroyed before the id is handed over (ibv_destroy_qp sends nothing and returns at once), so once
 * {@link #destroy} returns nothing reads or writes the connection's memory any more and its owner may free it; all
 * that is left is the id, which only the event channel and librdmacm's device reference, never our memory.
 *
 * <p>Several threads rather than one, because the kernel holds each id on its own: in the lab about one destroy in a
 * hundred under connection churn waits the full 66 s (16 DREQ tries, 4.1 s apart), and with 4 threads four such ids
 * held up 1,200 others behind them. Daemon threads that end after a while idle, so an idle broker keeps none.
 *
 * <p>Fair between sources: a peer that drops CM messages on purpose makes every id of its connections wait the
 * kernel's full minute, and 16 of them queued first-come would hold all the threads while every other peer's ids
 * wait behind (issue 37). So ids wait in one queue per source (its host: an IPv4 address, an IPv6 /64), the queues
 * are served in turn, and one source holds at most {@value #THREADS_PER_SOURCE} of the {@value #THREADS} threads.
 * The owner ({@link VerbsFabric}) {@link #drain}s this before it closes the event channel, which rdma_destroy_id
 * writes to.
 */
final class CmIdDestroyer {

    private static final Logger LOG = LoggerFactory.getLogger(CmIdDestroyer.class);
    /** Destroys at once; an unanswered DREQ holds one thread, not the others. */
    static final int THREADS = 20;
    /**
     * The most threads the ids of one source hold at once: as many as all sources had before sources took turns, so a
     * host that churns connections honestly (one client host with many JVMs, a reconnect storm) destroys as fast as
     * before; the other 4 stay free for everyone else's ids. (At 4 a source, a thousand connect-close cycles from one
     * host left more than 64 ids waiting, and DestroyBacklog refused that host: ConnectionChurnLabTest.)
     */
    static final int THREADS_PER_SOURCE = 16;
    /** A destroy slower than this is worth a line: the kernel waited on the peer. */
    private static final long SLOW_NANOS = TimeUnit.SECONDS.toNanos(1);
    private static final LogLimiter SLOW = LogLimiter.site(LOG, Level.INFO, "slow rdma_destroy_id calls");
    private static final LogLimiter FAILED = LogLimiter.site(LOG, Level.WARN, "failed rdma_cm id destroys");

    /** The source of ids that have no peer address. */
    private static final Object NO_SOURCE = new Object();

    private final ThreadPoolExecutor threads;
    private final AtomicInteger pending = new AtomicInteger();
    /** What runs once nothing is pending any more (see {@link #whenIdle}); taken by whoever runs it. */
    private final AtomicReference<Runnable> onIdle = new AtomicReference<>();
    /** Ids waiting for a thread, one queue per source, in the order the sources are served (under {@link #turns}). */
    private final LinkedHashMap<Object, ArrayDeque<Runnable>> turns = new LinkedHashMap<>();
    /** Threads each source holds now (under {@link #turns}). */
    private final Map<Object, Integer> running = new HashMap<>();
    private int runningTotal;

    CmIdDestroyer() {
        AtomicInteger n = new AtomicInteger();
        threads = new ThreadPoolExecutor(THREADS, THREADS, 10, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), r -> {
            Thread t = new Thread(r, "rdma-cm-destroy-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        threads.allowCoreThreadTimeOut(true);
    }

    /**
     * Runs {@code destroy} (an rdma_destroy_id) on one of this destroyer's threads, in {@code source}'s turn (its
     * peer's address; null for an id of no peer); {@code what} names the connection in the log. After {@link #drain}
     * it runs on the caller's thread: nothing may be left behind.
     */
    void destroy(Runnable destroy, String what, InetAddress source) {
        pending.incrementAndGet();
        Object key = source == null ? NO_SOURCE : SourceAddresses.host(source);
        Runnable timed = () -> {
            long start = System.nanoTime();
            try {
                destroy.run();
            } catch (RuntimeException e) {
                if (FAILED.admit()) { // one per connection closed: as often as a peer connects and leaves
                    LOG.warn("destroying the rdma_cm id of {} failed: {}", what, e.toString());
                }
            } finally {
                long took = System.nanoTime() - start;
                if (took > SLOW_NANOS && SLOW.admit()) {
                    LOG.info("rdma_destroy_id of {} took {} ms (the kernel waited for its CM messages)", what,
                            TimeUnit.NANOSECONDS.toMillis(took));
                }
                if (pending.decrementAndGet() == 0) {
                    runIdleHook();
                }
            }
        };
        synchronized (turns) {
            turns.computeIfAbsent(key, k -> new ArrayDeque<>()).add(timed);
        }
        dispatch();
    }

    /** Hands waiting ids to free threads, one source's turn after another's, within each source's share. */
    private void dispatch() {
        while (true) {
            Object source = null;
            Runnable next = null;
            synchronized (turns) {
                if (runningTotal >= THREADS) {
                    return;
                }
                for (Map.Entry<Object, ArrayDeque<Runnable>> e : turns.entrySet()) {
                    if (running.getOrDefault(e.getKey(), 0) < THREADS_PER_SOURCE) {
                        source = e.getKey();
                        next = e.getValue().poll();
                        break;
                    }
                }
                if (next == null) {
                    return; // nothing waits, or only sources at their share
                }
                ArrayDeque<Runnable> rest = turns.remove(source);
                if (!rest.isEmpty()) {
                    turns.put(source, rest); // to the back: the other sources go first
                }
                running.merge(source, 1, Integer::sum);
                runningTotal++;
            }
            Object mine = source;
            Runnable task = next;
            Runnable release = () -> {
                synchronized (turns) {
                    running.computeIfPresent(mine, (k, n) -> n == 1 ? null : n - 1);
                    runningTotal--;
                }
            };
            try {
                threads.execute(() -> {
                    try {
                        task.run();
                    } finally {
                        release.run();
                        dispatch(); // this thread is free: the next turn
                    }
                });
            } catch (RejectedExecutionException e) {
                // drained: nothing may be left behind, so it runs here (and this loop takes the next)
                try {
                    task.run();
                } finally {
                    release.run();
                }
            }
        }
    }

    /**
     * Runs {@code hook} once no id is pending any more, on the thread that destroyed the last one, or at once when
     * none is; for after {@link #drain}, so that no new id can arrive.
     */
    void whenIdle(Runnable hook) {
        onIdle.set(hook);
        if (pending.get() == 0) {
            runIdleHook();
        }
    }

    private void runIdleHook() {
        Runnable hook = onIdle.getAndSet(null);
        if (hook != null) {
            hook.run();
        }
    }

    /** Ids handed over and not destroyed yet. */
    int pending() {
        return pending.get();
    }

    /**
     * Lets the destroys handed over finish, for at most {@code millis}; returns whether they all did. When they did
     * not, a thread is still inside rdma_destroy_id and the event channel must be kept.
     */
    boolean drain(long millis) {
        threads.shutdown();
        try {
            return threads.awaitTermination(millis, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }
}
