package dev.artemisrdma.transport;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.function.Consumer;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.channel.RdmaChannelImpl;
import dev.artemisrdma.transport.config.TransportConfig;

/**
 * Closes many things at once, within a bound: the one close mechanism of the transport ({@link RdmaTransport#close})
 * and of the broker's acceptor. An orderly close waits for the peer (its credits, its acknowledgements); one by one,
 * N stuck peers would cost N times that. Here the orderly closes run in parallel on at most {@value #MAX_THREADS}
 * threads; those not returned within the orderly bound are then closed the forced way (in a pool of their own, so
 * they do not queue behind the stuck closes), and those still not returned after the forced bound are named in a
 * warning and in the result, and left to finish in the background: the caller never waits longer than the two bounds
 * together (plus thread start-up).
 *
 * <p>No thread outlives its close: the pools' threads are daemons, each pool is shut down before this returns, and a
 * close still running (or still queued) ends its thread when it returns.
 *
 * <p>Channels: {@link RdmaChannel#close} returns within closeTimeout + {@link RdmaChannelImpl#CLOSE_GRACE_NANOS}
 * whatever the peer does, and {@link RdmaChannel#forceClose} disconnects at once, leaving the disconnect and release
 * to the completion loop, which the grace covers. So {@link #channelOrderlyBound} is closeTimeout + grace (every close
 * started at once has returned by then) and {@link #channelForcedBound} the grace; each adds {@link #SLACK} so that a
 * close using its whole bound counts as returned instead of being named. Something still running after both is held
 * up by more than its peer (a lock, a stuck thread) and is reported; waiting longer would not help.
 *
 * <p>Stateless; callable from any thread.
 */
public final class BoundedClose {

    private static final Logger LOG = LoggerFactory.getLogger(BoundedClose.class);
    /** The most closes that run at once per phase. */
    static final int MAX_THREADS = 64;
    /** What a bound allows beyond the close's own bound, for thread start-up and scheduling. */
    static final Duration SLACK = Duration.ofMillis(250);
    private static final AtomicInteger POOLS = new AtomicInteger();

    private BoundedClose() {
    }

    /** How long orderly closes of channels with this configuration may take all together (see above). */
    public static Duration channelOrderlyBound(TransportConfig config) {
        return config.closeTimeout().plusNanos(RdmaChannelImpl.CLOSE_GRACE_NANOS).plus(SLACK);
    }

    /** How long forced closes of channels may take after the orderly bound (see above). */
    public static Duration channelForcedBound() {
        return Duration.ofNanos(RdmaChannelImpl.CLOSE_GRACE_NANOS).plus(SLACK);
    }

    /**
     * Closes every item: {@code orderly} in parallel, at most {@code orderlyBound}; then {@code forced} for those not
     * returned by then, at most {@code forcedBound}. Returns, in the given order, the items whose closes had still not
     * returned (each named, with {@code name}, in a warning from {@code owner}); they finish in the background. A
     * close that throws counts as returned; the exception is logged.
     */
    public static <T> List<T> closeAll(String owner, Collection<? extends T> items, Function<? super T, ?> name,
                                       Consumer<? super T> orderly, Duration orderlyBound,
                                       Consumer<? super T> forced, Duration forcedBound) {
        List<T> stuck = runAll(owner, "close", new ArrayList<>(items), name, orderly, orderlyBound);
        if (stuck.isEmpty()) {
            return stuck;
        }
        LOG.warn("{}: {} did not close within {} ms; disconnecting them", owner, names(stuck, name),
                orderlyBound.toMillis());
        List<T> left = runAll(owner, "disconnect", stuck, name, forced, forcedBound);
        if (!left.isEmpty()) {
            LOG.warn("{}: {} still closing after {} ms; they finish in the background", owner, names(left, name),
                    orderlyBound.plus(forcedBound).toMillis());
        }
        return left;
    }

    /** Runs {@code action} on every item, in parallel, bounded; returns the items whose action has not returned. */
    private static <T> List<T> runAll(String owner, String what, List<T> items, Function<? super T, ?> name,
                                      Consumer<? super T> action, Duration bound) {
        if (items.isEmpty()) {
            return new ArrayList<>();
        }
        CountDownLatch done = new CountDownLatch(items.size());
        AtomicIntegerArray returned = new AtomicIntegerArray(items.size()); // by position: items need no equals
        ExecutorService pool = pool(owner, what, Math.min(MAX_THREADS, items.size()));
        try {
            for (int i = 0; i < items.size(); i++) {
                T item = items.get(i);
                int index = i;
                pool.execute(() -> {
                    try {
                        action.accept(item);
                    } catch (RuntimeException | Error e) {
                        LOG.warn("{}: {} of {} failed", owner, what, name.apply(item), e);
                    } finally {
                        returned.set(index, 1);
                        done.countDown();
                    }
                });
            }
            await(done, bound);
        } finally {
            pool.shutdown(); // queued and running actions still finish, then the threads end
        }
        List<T> notReturned = new ArrayList<>();
        for (int i = 0; i < items.size(); i++) {
            if (returned.get(i) == 0) {
                notReturned.add(items.get(i));
            }
        }
        return notReturned;
    }

    private static <T> List<Object> names(List<T> items, Function<? super T, ?> name) {
        List<Object> names = new ArrayList<>(items.size());
        for (T item : items) {
            names.add(name.apply(item));
        }
        return names;
    }

    private static void await(CountDownLatch latch, Duration bound) {
        try {
            latch.await(bound.toNanos(), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // the caller is told what had not returned, as on a timeout
        }
    }

    private static ExecutorService pool(String owner, String what, int threads) {
        String prefix = "rdma-" + what + "-" + POOLS.incrementAndGet() + "-";
        AtomicInteger n = new AtomicInteger();
        return new ThreadPoolExecutor(threads, threads, 1, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), r -> {
            Thread t = new Thread(r, prefix + n.incrementAndGet());
            t.setDaemon(true);
            t.setUncaughtExceptionHandler((th, e) -> LOG.error("{}: {} died", owner, th.getName(), e));
            return t;
        });
    }
}
