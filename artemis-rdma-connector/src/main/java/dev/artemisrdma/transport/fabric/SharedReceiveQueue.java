package dev.artemisrdma.transport.fabric;

/**
 * A shared receive queue (ibv_create_srq): one pool of posted receives that every queue pair created on it consumes
 * from. A SEND to such a queue pair takes the oldest receive of the pool, whichever connection it came from, and its
 * completion goes to the receiving queue pair's completion queue with that queue pair's number (the work request id
 * names only the buffer). Receives are never flushed by a queue pair's error: they stay posted for the others.
 *
 * <p>Posting is single-threaded. {@link #close()} only after every queue pair using it is destroyed, and before the
 * memory its receives point into is deregistered.
 */
public interface SharedReceiveQueue extends AutoCloseable {

    /** Receives it can hold posted at once (the device may round up what was asked). */
    int capacity();

    /** Posts every receive of {@code list} with one call; the list may be reused once this returns. */
    void postRecv(RecvList list) throws FabricException;

    /**
     * Arms the limit event (ibv_modify_srq with srq_limit): when fewer than {@code limit} receives remain posted the
     * device raises IBV_EVENT_SRQ_LIMIT_REACHED once (re-arm to hear it again). The transport's credits keep the
     * pool from running dry, so for it the event is a safety signal only. The default does nothing (a fabric that
     * cannot report it).
     */
    default void armLimit(int limit) throws FabricException {
    }

    /**
     * Whom to tell when the device reports this queue failed (IBV_EVENT_SRQ_ERR): its receives can no longer be
     * trusted to be posted, so a peer's SEND may meet none and wait in RNR retries for ever. Called at most once, on
     * the thread that reads the device's events. The default never calls (a fabric that cannot report it).
     */
    default void onFailure(java.util.function.Consumer<String> listener) {
    }

    /**
     * What an implementation keeps for {@link #onFailure}: the listener, and the failure it is told once (at once when
     * the queue failed before anyone listened). Thread-safe; the listener runs outside the lock when the queue fails.
     */
    final class FailureNotice {
        private java.util.function.Consumer<String> listener;
        private String failure;

        public synchronized void listen(java.util.function.Consumer<String> listener) {
            this.listener = listener;
            if (failure != null) {
                listener.accept(failure); // failed before anyone listened
            }
        }

        /** Records the failure and tells the listener; false when it had failed already. */
        public boolean fail(String reason) {
            java.util.function.Consumer<String> told;
            synchronized (this) {
                if (failure != null) {
                    return false;
                }
                failure = reason;
                told = listener;
            }
            if (told != null) {
                told.accept(reason);
            }
            return true;
        }
    }

    /**
     * Destroys the queue. Throws {@link IllegalStateException} when the device refused (a queue pair still uses it):
     * its receives are then still posted, so their memory must stay registered.
     */
    @Override
    void close();
}
