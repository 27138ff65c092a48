package dev.artemisrdma.transport.fabric;

/** Connection events of one queue pair, delivered on the fabric's connection-manager thread. */
public interface QueuePairEvents {

    /** The handshake completed (passive side); sends may be posted from now on. */
    default void established(QueuePair queuePair) {
    }

    /** The peer disconnected, the device went away, or the connection failed; the queue pair is unusable. */
    void disconnected(QueuePair queuePair, String reason);
}
