package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;

import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.channel.RdmaChannelImpl;
import dev.artemisrdma.transport.config.TransportConfig;

/** The one close mechanism: parallel, bounded, names what did not close, leaves no thread behind. */
class BoundedCloseTest {

    private static final Duration ORDERLY = Duration.ofMillis(300);
    private static final Duration FORCED = Duration.ofMillis(200);

    @Test
    void closesRunInParallelWithinTheOrderlyBound() {
        List<String> items = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            items.add("ch-" + i);
        }
        CountDownLatch allStarted = new CountDownLatch(items.size());
        Set<String> closed = ConcurrentHashMap.newKeySet();
        AtomicInteger forced = new AtomicInteger();
        long start = System.nanoTime();
        List<String> left = BoundedClose.closeAll("test", items, s -> s, s -> {
            allStarted.countDown();
            await(allStarted); // returns only once all run together: one at a time would never get here
            closed.add(s);
        }, Duration.ofSeconds(5), s -> forced.incrementAndGet(), FORCED);
        assertEquals(List.of(), left);
        assertEquals(items.size(), closed.size());
        assertEquals(0, forced.get(), "nothing left to force");
        assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) < 5000);
    }

    @Test
    void aCloseHangingPastTheBoundDoesNotHangTheCallerAndIsNamed() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        List<String> forced = new ArrayList<>();
        Set<Thread> closers = ConcurrentHashMap.newKeySet();
        long start = System.nanoTime();
        List<String> left = BoundedClose.closeAll("test", List.of("fine", "hung", "slow"), s -> "channel " + s, s -> {
            closers.add(Thread.currentThread());
            if (!s.equals("fine")) {
                await(release); // a peer that never answers: the orderly close hangs
            }
        }, ORDERLY, s -> {
            closers.add(Thread.currentThread());
            synchronized (forced) {
                forced.add(s);
            }
            if (s.equals("hung")) {
                await(release); // and so does its forced close
            }
        }, FORCED);
        long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        try {
            assertEquals(List.of("hung"), left, "the close that outlived both bounds is named, and only it");
            assertEquals(Set.of("hung", "slow"), Set.copyOf(forced), "what missed the orderly bound is forced");
            assertTrue(millis < ORDERLY.plus(FORCED).toMillis() + 1000, "the caller waited " + millis + " ms");
        } finally {
            release.countDown();
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (closers.stream().anyMatch(Thread::isAlive) && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertEquals(List.of(), closers.stream().filter(Thread::isAlive).map(Thread::getName)
                .collect(Collectors.toList()), "close threads outlived their closes");
        assertTrue(closers.stream().allMatch(Thread::isDaemon));
    }

    @Test
    void manyClosesUseABoundedNumberOfThreads() {
        Set<Thread> threads = ConcurrentHashMap.newKeySet();
        List<Integer> items = new ArrayList<>();
        for (int i = 0; i < BoundedClose.MAX_THREADS * 3; i++) {
            items.add(i);
        }
        List<Integer> left = BoundedClose.closeAll("test", items, i -> i, i -> {
            threads.add(Thread.currentThread());
            sleep(5);
        }, Duration.ofSeconds(10), i -> { }, FORCED);
        assertEquals(List.of(), left);
        assertTrue(threads.size() <= BoundedClose.MAX_THREADS, threads.size() + " threads");
    }

    @Test
    void aCloseThatThrowsCountsAsReturned() {
        List<String> left = BoundedClose.closeAll("test", List.of("a", "b"), s -> s, s -> {
            throw new IllegalStateException("broken " + s);
        }, ORDERLY, s -> { }, FORCED);
        assertEquals(List.of(), left);
    }

    @Test
    void channelBoundsFollowTheChannelsOwnCloseBound() {
        TransportConfig config = TransportConfig.builder().closeTimeout(Duration.ofSeconds(3)).build();
        Duration grace = Duration.ofNanos(RdmaChannelImpl.CLOSE_GRACE_NANOS);
        assertEquals(Duration.ofSeconds(3).plus(grace).plus(BoundedClose.SLACK),
                BoundedClose.channelOrderlyBound(config));
        assertEquals(grace.plus(BoundedClose.SLACK), BoundedClose.channelForcedBound());
    }

    private static void await(CountDownLatch latch) {
        try {
            latch.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
