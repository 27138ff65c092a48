package dev.artemisrdma.transport.fabric;

/**
 * A completion queue and its completion channel. One thread polls it; {@link #close()} only after every queue
 * pair using it is destroyed.
 */
public interface CompletionQueue extends AutoCloseable {

    int capacity();

    /** Moves up to {@code out.capacity()} completions into {@code out}; returns how many (0 when empty). */
    int poll(Completions out) throws FabricException;

    /**
     * Like {@link #poll}, but may retry up to {@code spins} times while the queue is empty before returning 0: a
     * busy-poll loop's cheaper step. The default polls once.
     */
    default int pollSpinning(Completions out, int spins) throws FabricException {
        return poll(out);
    }

    /** Arms the completion channel: the next completion will wake {@link #awaitNotification}. */
    void requestNotification() throws FabricException;

    /**
     * Waits up to {@code timeoutMillis} (negative: without a timeout) for the armed notification and consumes it.
     * Returns false on the timeout or when {@link #wakeUp} ended the wait.
     */
    boolean awaitNotification(long timeoutMillis) throws FabricException;

    /**
     * Ends the poller's current {@link #awaitNotification} early, or its next one when it is not waiting now (a
     * wake-up is never lost between deciding to wait and waiting). Safe from any thread, and a no-op after close.
     */
    void wakeUp();

    @Override
    void close();
}
