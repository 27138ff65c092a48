package dev.artemisrdma.artemis;

import java.lang.invoke.MethodHandles;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Closes many connections at once, within a bound. An orderly close waits for the peer (its credits, its
 * acknowledgements); one by one, N stuck peers would cost N times that. Here every close runs in parallel; those not
 * done after {@link #ORDERLY} are disconnected at once, and those still not closed {@link #FORCED} later are left to
 * finish in the background, with a warning naming them.
 */
final class ParallelClose {

    private static final Logger logger = LoggerFactory.getLogger(MethodHandles.lookup().lookupClass());
    /** How long orderly closes may take all together. */
    static final Duration ORDERLY = Duration.ofSeconds(5);
    /** How long disconnects of what remains may take after that. */
    static final Duration FORCED = Duration.ofSeconds(2);
    private static final int MAX_THREADS = 64;
    private static final AtomicInteger POOLS = new AtomicInteger();

    private ParallelClose() {
    }

    /** Destroys every connection (the broker is told each failed, so clients fail over); bounded as above. */
    static void closeAll(String owner, List<RdmaConnection> connections) {
        if (connections.isEmpty()) {
            return;
        }
        ExecutorService pool = pool(owner, connections.size());
        try {
            CountDownLatch done = new CountDownLatch(connections.size());
            Set<RdmaConnection> closed = ConcurrentHashMap.newKeySet();
            for (RdmaConnection connection : connections) {
                pool.execute(() -> {
                    try {
                        connection.destroy();
                    } catch (RuntimeException | Error e) {
                        logger.warn("{}: closing connection {} failed", owner, connection.getID(), e);
                    } finally {
                        closed.add(connection);
                        done.countDown();
                    }
                });
            }
            if (await(done, ORDERLY)) {
                return;
            }
            List<RdmaConnection> stuck = new ArrayList<>();
            for (RdmaConnection connection : connections) {
                if (!closed.contains(connection)) {
                    stuck.add(connection);
                }
            }
            logger.warn("{}: {} connections did not close within {} ms; disconnecting them", owner, done.getCount(),
                    ORDERLY.toMillis());
            for (RdmaConnection connection : stuck) {
                // a thread of its own: forceClose waits for the release, and must not queue behind stuck closes
                Thread t = new Thread(() -> {
                    try {
                        connection.channel().forceClose();
                    } catch (RuntimeException | Error e) {
                        logger.warn("{}: disconnecting connection {} failed", owner, connection.getID(), e);
                    }
                }, owner + "-disconnect");
                t.setDaemon(true);
                t.start();
            }
            if (!await(done, FORCED)) {
                logger.warn("{}: {} connections still closing after {} ms; they finish in the background", owner,
                        done.getCount(), ORDERLY.plus(FORCED).toMillis());
            }
        } finally {
            pool.shutdown();
        }
    }

    private static boolean await(CountDownLatch latch, Duration bound) {
        try {
            return latch.await(bound.toNanos(), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    private static ExecutorService pool(String owner, int closes) {
        int threads = Math.min(MAX_THREADS, closes);
        String prefix = "rdma-close-" + POOLS.incrementAndGet() + "-";
        AtomicInteger n = new AtomicInteger();
        return new ThreadPoolExecutor(threads, threads, 1, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), r -> {
            Thread t = new Thread(r, prefix + n.incrementAndGet());
            t.setDaemon(true);
            t.setUncaughtExceptionHandler((th, e) -> logger.error("{}: {} died", owner, th.getName(), e));
            return t;
        });
    }
}
