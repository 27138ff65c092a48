package dev.artemisrdma.transport;

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
     * Waits up to {@code timeoutMillis} for the armed notification and consumes it. Returns false on timeout,
     * so a loop can always notice that it should stop.
     */
    boolean awaitNotification(long timeoutMillis) throws FabricException;

    @Override
    void close();
}
