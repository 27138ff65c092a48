package dev.artemisrdma.transport.channel;

import java.util.concurrent.locks.ReentrantLock;

/**
 * The lock of one channel ({@link RdmaChannelImpl}'s, shared with its lifecycle): a {@link ReentrantLock} that spins
 * briefly before it queues. Why: a ReentrantLock that finds itself held allocates a queue node for the thread that
 * waits, and on the steady path a writer and the completion loop meet at this lock all the time (a write's enqueue
 * and flush against the loop's end of batch), each holding it for well under a microsecond. Queuing at once cost the
 * sender's loop 1.6-1.9 bytes a frame on average (SteadyPathAllocationTest, before this class); spinning about as long
 * as such a hold lasts, then yielding a few times (a holder that lost its core on a busy host gets one back), takes
 * the lock without a node in nearly every meeting. A hold that outlasts both (a long teardown step) queues as before. Semantics are ReentrantLock's (non-fair, reentrant,
 * conditions); thread-safe.
 */
final class ChannelLock extends ReentrantLock {
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
