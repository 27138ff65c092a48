package dev.artemisrdma.transport.verbs;

import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.SpinningLock;

import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;

/**
 * What makes a post after a queue's release impossible: every post on one queue (a queue pair or a shared receive
 * queue) runs inside this gate, and so does the release that destroys the queue and frees the native work-request
 * lists it is posted through.
 *
 * <p>Why a lock and not the owner's thread: the release does not always come from the thread that posts. The
 * transport's close gives up on a completion loop stuck in a handler after its timeouts (about 15 s), and then the
 * fabric's close ({@link VerbsQueuePair#close}) or a device's release ({@link VerbsDevice#releaseLeftovers}) frees
 * what that loop still posts through. Without the gate the loop, once its handler returns, writes work requests into
 * freed native memory and hands the provider a destroyed queue: a JVM crash. With it, a release waits for a post under
 * way (a post is a few list writes and one ibv_post_* call, which never blocks), and every later post fails with a
 * {@link FabricException} that names the verb and the queue, as a post on any closed connection fails.
 *
 * <p>Uncontended, a post costs one compare-and-set to enter and one to leave; it allocates nothing.
 */
final class PostGate {

    /** A writer's post of SENDs and the loop's repost of receives meet here: see SpinningLock. */
    private final ReentrantLock lock = new SpinningLock();
    /** Names the queue in errors ("queue pair 257 to 10.0.0.2:4000"); asked only when a post is refused. */
    private final Supplier<String> queue;
    /** Set, under {@link #lock}, once the queue is destroyed and its lists freed. */
    private boolean released;

    PostGate(Supplier<String> queue) {
        this.queue = queue;
    }

    /**
     * Enters for one post with {@code verb} (named in the error); the caller posts and then calls {@link #exit}, in a
     * finally. Refused once the queue is released: nothing of it may be touched any more.
     */
    void enter(String verb) throws FabricException {
        lock.lock();
        if (released) {
            lock.unlock();
            throw new FabricException(verb + ": " + queue.get() + " is closed (destroyed by the transport or the "
                    + "fabric); nothing is posted on it any more");
        }
    }

    /** Leaves after a post that {@link #enter} let in. */
    void exit() {
        lock.unlock();
    }

    /**
     * Releases the queue: runs {@code destroyAndFree} (destroy the queue, then free its native lists) once no post is
     * under way, and refuses every post from then on. Returns false, running nothing, when released already. When
     * {@code destroyAndFree} throws (a queue the device would not destroy yet), the queue stays open for posts: it
     * is still alive, and its owner may still post on it.
     */
    boolean release(Runnable destroyAndFree) {
        lock.lock();
        try {
            if (released) {
                return false;
            }
            destroyAndFree.run();
            released = true;
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** Whether the queue is released (tests). */
    boolean isReleased() {
        lock.lock();
        try {
            return released;
        } finally {
            lock.unlock();
        }
    }
}
