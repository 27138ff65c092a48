package dev.artemisrdma.transport.verbs;

import dev.artemisrdma.transport.fabric.LogLimiter;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

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
 * The owner ({@link VerbsFabric}) {@link #drain}s this before it closes the event channel, which rdma_destroy_id
 * writes to.
 */
final class CmIdDestroyer {

    private static final Logger LOG = LoggerFactory.getLogger(CmIdDestroyer.class);
    /** Destroys at once; an unanswered DREQ holds one thread, not the others. */
    static final int THREADS = 16;
    /** A destroy slower than this is worth a line: the kernel waited on the peer. */
    private static final long SLOW_NANOS = TimeUnit.SECONDS.toNanos(1);
    private static final LogLimiter SLOW = LogLimiter.site(LOG, Level.INFO, "slow rdma_destroy_id calls");
    private static final LogLimiter FAILED = LogLimiter.site(LOG, Level.WARN, "failed rdma_cm id destroys");

    private final ThreadPoolExecutor threads;
    private final AtomicInteger pending = new AtomicInteger();
    /** What runs once nothing is pending any more (see {@link #whenIdle}); taken by whoever runs it. */
    private final AtomicReference<Runnable> onIdle = new AtomicReference<>();

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
     * Runs {@code destroy} (an rdma_destroy_id) on one of this destroyer's threads; {@code what} names the
     * connection in the log. After {@link #drain} it runs on the caller's thread: nothing may be left behind.
     */
    void destroy(Runnable destroy, String what) {
        pending.incrementAndGet();
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
        try {
            threads.execute(timed);
        } catch (RejectedExecutionException e) {
            timed.run(); // drained: nothing may be left behind
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
