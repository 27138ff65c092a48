package dev.artemisrdma.transport.verbs;

import org.junit.jupiter.api.Test;

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
        }, "the stuck one"); // returns at once: the caller is a completion loop
        assertTrue(stuckStarted.await(5, TimeUnit.SECONDS));

        CountDownLatch othersDone = new CountDownLatch(20);
        for (int i = 0; i < 20; i++) {
            destroyer.destroy(othersDone::countDown, "id " + i);
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
        destroyer.destroy(() -> awaitQuietly(kernelLetsGo), "stuck");

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
        destroyer.destroy(() -> destroyedOn.set(Thread.currentThread() == caller ? 1 : 2), "late");
        assertEquals(1, destroyedOn.get());
        assertEquals(0, destroyer.pending());
    }

    @Test
    void theOwnersLastStepRunsOnceTheKernelLetsGoOfTheLastId() throws Exception {
        CmIdDestroyer destroyer = new CmIdDestroyer();
        CountDownLatch kernelLetsGo = new CountDownLatch(1);
        destroyer.destroy(() -> awaitQuietly(kernelLetsGo), "stuck");
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
        }, "bad");
        assertTrue(destroyer.drain(5_000));
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
