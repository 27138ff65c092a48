package dev.artemisrdma.transport.fabric;

import java.util.concurrent.locks.ReentrantLock;

/**
 * A {@link ReentrantLock} that spins briefly, then yields a few times, before it queues, for the locks that the
 * threads of one connection's steady path meet at: a channel's lock (writers against its completion loop's end of
 * batch) and a verbs queue's post gate (a writer's post of SENDs against the loop's repost of receives). Why: a
 * ReentrantLock that finds itself held allocates a queue node for the thread that waits, and these locks are held
 * for well under a microsecond, so queuing at once cost an object per meeting (the sender's loop 1.6-1.9 bytes a
 * frame on average, SteadyPathAllocationTest, issue 39). Spinning about as long as such a hold lasts, then yielding (a
 * holder that lost its core on a busy host gets one back), takes the lock without a node in nearly every meeting; a
 * hold that outlasts both (a long teardown step) queues as before. Semantics are ReentrantLock's (non-fair,
 * reentrant, conditions); thread-safe.
 */
public final class SpinningLock extends ReentrantLock {
    private static final long serialVersionUID = 1L;
    /** About a microsecond or two of PAUSE on current x86: longer than a write's or an end of batch's hold. */
    private static final int SPINS = 256;
    /** Then a few yields, each a few microseconds: the holder may be waiting for a core. */
    private static final int YIELDS = 8;

    @Override
    public void lock() {
        if (tryLock()) {
            return;
        }
        for (int i = 0; i < SPINS; i++) {
            Thread.onSpinWait();
            if (!isLocked() && tryLock()) {
                return;
            }
        }
        for (int i = 0; i < YIELDS; i++) { // a holder without a CPU (more threads than cores) gets one
            Thread.yield();
            if (!isLocked() && tryLock()) {
                return;
            }
        }
        super.lock();
    }
}
