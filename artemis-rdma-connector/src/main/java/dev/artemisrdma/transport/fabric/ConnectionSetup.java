package dev.artemisrdma.transport.fabric;

/** How the transport builds a connection's queue pair once the device is known. */
public interface ConnectionSetup {

    /** Queue depths, scatter-gather limits and the completion queue (on {@code device}) for the new queue pair. */
    QueuePairSpec queuePairSpec(FabricDevice device) throws FabricException;

    /**
     * Called once the queue pair exists and before the handshake completes: post the initial receives here. This
     * hands the queue pair over: from this call on, whether it returns or throws, and whatever becomes of the
     * connect or accept, only the caller's side destroys it (its loop may be posting to it), never the fabric.
     */
    void prepare(QueuePair queuePair) throws FabricException;
}
