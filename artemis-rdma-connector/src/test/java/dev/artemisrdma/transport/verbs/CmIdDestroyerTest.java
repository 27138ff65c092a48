package dev.artemisrdma.transport.verbs;

import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The destroyer stands in for what the lab saw: rdma_destroy_id held for a minute by a DREQ nobody answered, on
 * the completion loop that called it. Here a destroy that blocks is a latch.
 */
class CmIdDestroyerTest {

    @Test
    void aDestroyTheKernelHoldsHoldsNeitherTheCallerNorTheOtherIds() throws Exception {
        CmIdDestroyer destroyer = new CmIdDestroyer();
        CountDownLatch kernelLetsGo = new CountDownLatch(1);
        CountDownLatch stuckStarted = new CountDownLatch(1);
        destroyer.destroy(() -> {
            stuckStarted.countDown();
            awaitQuietly(kernelLetsGo);
        }, "the stuck one", null); // returns at once: the caller is a completion loop
        assertTrue(stuckStarted.await(5, TimeUnit.SECONDS));

        CountDownLatch othersDone = new CountDownLatch(20);
        for (int i = 0; i < 20; i++) {
            destroyer.destroy(othersDone::countDown, "id " + i, null);
        }
        assertTrue(othersDone.await(5, TimeUnit.SECONDS), "ids behind a stuck one were destroyed meanwhile");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (destroyer.pending() > 1 && System.nanoTime() < deadline) {
            Thread.sleep(1); // the count drops just after each destroy returns
        }
        assertEquals(1, destroyer.pending(), "only the stuck id is still being destroyed");

        kernelLetsGo.countDown();
        assertTrue(destroyer.drain(5_000));
        assertEquals(0, destroyer.pending());
    }

    @Test
    void drainWaitsOnlyBoundedAndSaysAnIdIsStillInTheKernel() throws Exception {
        CmIdDestroyer destroyer = new CmIdDestroyer();
        CountDownLatch kernelLetsGo = new CountDownLatch(1);
        destroyer.destroy(() -> awaitQuietly(kernelLetsGo), "stuck", null);

        long start = System.nanoTime();
        assertFalse(destroyer.drain(200), "an id still in rdma_destroy_id: the owner must keep the event channel");
        assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(5), "the drain is bounded");
        assertEquals(1, destroyer.pending());

        kernelLetsGo.countDown();
        assertTrue(destroyer.drain(5_000));
    }

    @Test
    void afterTheDrainAnIdIsDestroyedOnTheCallersThreadNotLeftBehind() {
        CmIdDestroyer destroyer = new CmIdDestroyer();
        assertTrue(destroyer.drain(1_000));
        AtomicInteger destroyedOn = new AtomicInteger();
        Thread caller = Thread.currentThread();
        destroyer.destroy(() -> destroyedOn.set(Thread.currentThread() == caller ? 1 : 2), "late", null);
        assertEquals(1, destroyedOn.get());
        assertEquals(0, destroyer.pending());
    }

    @Test
    void theOwnersLastStepRunsOnceTheKernelLetsGoOfTheLastId() throws Exception {
        CmIdDestroyer destroyer = new CmIdDestroyer();
        CountDownLatch kernelLetsGo = new CountDownLatch(1);
        destroyer.destroy(() -> awaitQuietly(kernelLetsGo), "stuck", null);
        assertFalse(destroyer.drain(100));
        CountDownLatch released = new CountDownLatch(1);
        destroyer.whenIdle(released::countDown); // the fabric: stop the event thread, close channel and devices
        assertFalse(released.await(200, TimeUnit.MILLISECONDS), "nothing is released under an id still destroyed");
        kernelLetsGo.countDown();
        assertTrue(released.await(5, TimeUnit.SECONDS), "released once the last id is gone");

        CountDownLatch atOnce = new CountDownLatch(1);
        destroyer.whenIdle(atOnce::countDown);
        assertEquals(0, atOnce.getCount(), "with nothing pending the last step runs at once");
    }

    @Test
    void aFailingDestroyIsLoggedAndCounted() {
        CmIdDestroyer destroyer = new CmIdDestroyer();
        destroyer.destroy(() -> {
            throw new IllegalStateException("EINVAL");
        }, "bad", null);
        assertTrue(destroyer.drain(5_000));
        assertEquals(0, destroyer.pending());
    }

    /**
     * One host's 64 connections whose ids the kernel holds (their peer drops CM messages on purpose) hold at most
     * {@link CmIdDestroyer#THREADS_PER_SOURCE} threads: the ids of another host, and of an IPv6 host, queued behind
     * them go at once; the held ones still go, in turn, once the kernel lets go.
     */
    @Test
    void oneSourcesStuckIdsHoldOnlyItsShareOfTheThreads() throws Exception {
        CmIdDestroyer destroyer = new CmIdDestroyer();
        InetAddress attacker = InetAddress.getByName("10.78.0.2");
        CountDownLatch kernelLetsGo = new CountDownLatch(1);
        AtomicInteger attackerRunning = new AtomicInteger();
        AtomicInteger attackerMostAtOnce = new AtomicInteger();
        AtomicInteger attackerDone = new AtomicInteger();
        for (int i = 0; i < 64; i++) {
            destroyer.destroy(() -> {
                attackerMostAtOnce.accumulateAndGet(attackerRunning.incrementAndGet(), Math::max);
                awaitQuietly(kernelLetsGo);
                attackerRunning.decrementAndGet();
                attackerDone.incrementAndGet();
            }, "stuck " + i, attacker);
        }
        CountDownLatch othersDone = new CountDownLatch(40);
        for (int i = 0; i < 20; i++) {
            destroyer.destroy(othersDone::countDown, "honest " + i, InetAddress.getByName("10.78.0.3"));
            // two addresses of one IPv6 host (one /64): one source
            destroyer.destroy(othersDone::countDown, "v6 " + i, InetAddress.getByName("fd78::" + (i + 1)));
        }
        assertTrue(othersDone.await(5, TimeUnit.SECONDS), "other hosts' ids waited behind the stuck ones");
        // the stuck source's last thread may still be starting when the others are done: wait for it to take its
        // share (the most at once only grows, so a source holding more than its share still fails the check below)
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (attackerMostAtOnce.get() < CmIdDestroyer.THREADS_PER_SOURCE && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertEquals(CmIdDestroyer.THREADS_PER_SOURCE, attackerMostAtOnce.get(),
                "threads the stuck source held at once");
        kernelLetsGo.countDown();
        assertTrue(destroyer.drain(10_000));
        assertEquals(64, attackerDone.get(), "every held id was destroyed in the end");
        assertEquals(0, destroyer.pending());
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await(30, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
