package dev.artemisrdma.transport.verbs;

import dev.artemisrdma.transport.fabric.FabricException;
import org.junit.jupiter.api.Test;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Issue 37, hole 5: the fabric's close (or a device's release) destroys a queue and frees the native request lists it
 * is posted through while a completion loop the transport gave up on still runs; once its handler returns, that loop
 * posts. Here the native list is a stand-in that records any use after it was freed (on verbs: a write into freed
 * memory, then ibv_post_* on a destroyed queue, a JVM crash), and the poster and the closer are two threads, as they
 * are then.
 */
class PostGateTest {

    /** Stands in for SendRequests/RecvRequests plus the queue: a use after {@link #free} is what crashes on verbs. */
    private static final class NativeList {
        volatile boolean freed;
        final AtomicReference<String> useAfterFree = new AtomicReference<>();

        void write(String what) {
            if (freed) {
                useAfterFree.compareAndSet(null, what);
            }
        }

        void free() {
            freed = true;
        }
    }

    /** What VerbsQueuePair.postSend does: enter, fill the list, post, exit. */
    private static void post(PostGate gate, NativeList list, Runnable whilePosting) throws FabricException {
        gate.enter("rdma_post_sendv");
        try {
            list.write("a work request written");
            whilePosting.run();
            list.write("ibv_post_send on the queue");
        } finally {
            gate.exit();
        }
    }

    @Test
    void aPostAfterTheReleaseIsRefusedNamingTheVerbAndTheQueueAndTouchesNothing() {
        PostGate gate = new PostGate(() -> "queue pair 257 to 10.77.0.2:40001");
        NativeList list = new NativeList();
        assertTrue(gate.release(list::free));

        FabricException refused = assertThrows(FabricException.class, () -> post(gate, list, () -> { }),
                "a post after the release must be refused");
        assertTrue(refused.getMessage().contains("rdma_post_sendv") && refused.getMessage().contains("queue pair 257")
                && refused.getMessage().contains("10.77.0.2:40001"), refused.getMessage());
        assertEquals(null, list.useAfterFree.get(), "the freed list was written");
        assertFalse(gate.release(() -> { throw new AssertionError("released twice"); }), "released once");
    }

    @Test
    void aReleaseWaitsForThePostUnderWayThenRefusesTheNext() throws Exception {
        PostGate gate = new PostGate(() -> "queue pair 258 to 10.77.0.2:40002");
        NativeList list = new NativeList();
        CountDownLatch inPost = new CountDownLatch(1);
        CountDownLatch finishPost = new CountDownLatch(1);
        AtomicReference<Throwable> posterFailed = new AtomicReference<>();
        // the loop thread: inside a post when the closer comes (the handler returned and answers the peer)
        Thread loop = new Thread(() -> {
            try {
                post(gate, list, () -> {
                    inPost.countDown();
                    await(finishPost);
                });
            } catch (Throwable t) {
                posterFailed.set(t);
            }
        }, "test-loop");
        loop.start();
        assertTrue(inPost.await(10, TimeUnit.SECONDS));

        Thread closer = new Thread(() -> gate.release(list::free), "test-fabric-close");
        closer.start();
        // the closer must wait for the post: wait (generously) until it is parked on the gate, or has freed already
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!list.freed && closer.getState() != Thread.State.WAITING && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertFalse(list.freed, "the lists were freed while a post was writing them");
        finishPost.countDown();
        loop.join(10_000);
        closer.join(10_000);
        assertEquals(null, posterFailed.get());
        assertEquals(null, list.useAfterFree.get(), "the post under way used freed memory");
        assertTrue(list.freed, "freed once the post left");

        assertThrows(FabricException.class, () -> post(gate, list, () -> { }), "the next post is refused");
        assertEquals(null, list.useAfterFree.get(), "a post after the release used freed memory");
    }

    @Test
    void aQueueTheDeviceWouldNotDestroyStaysOpenForPosts() throws Exception {
        PostGate gate = new PostGate(() -> "the shared receive queue on rxe0");
        NativeList list = new NativeList();
        assertThrows(IllegalStateException.class, () -> gate.release(() -> {
            throw new IllegalStateException("ibv_destroy_srq failed on rxe0: the shared receive queue is still in use");
        }));
        assertFalse(gate.isReleased(), "ibv_destroy_srq refused: the queue lives on");
        post(gate, list, () -> { }); // its owner may still post
        assertTrue(gate.release(list::free));
        assertTrue(gate.isReleased());
    }

    private static void await(CountDownLatch latch) {
        try {
            latch.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
