package dev.artemisrdma.transport.fabric;

/** How the transport builds a connection's queue pair once the device is known. */
public interface ConnectionSetup {

    /** The most creates one queue pair may take: the first ask and the smaller ones after refusals. */
    int MAX_CREATE_ATTEMPTS = 16;

    /** Queue depths, scatter-gather limits and the completion queue (on {@code device}) for the new queue pair. */
    QueuePairSpec queuePairSpec(FabricDevice device) throws FabricException;

    /**
     * The device refused {@code refused} ({@code why}: EINVAL, without saying what it allows): a smaller request to
     * try instead, or null to give up and fail the connection with {@code why}. Unless overridden, gives up.
     */
    default QueuePairSpec afterRefusal(FabricDevice device, QueuePairSpec refused, QueuePairRefusedException why)
            throws FabricException {
        return null;
    }

    /**
     * Called once the queue pair exists and before the handshake completes: post the initial receives here. This
     * hands the queue pair over: from this call on, whether it returns or throws, and whatever becomes of the
     * connect or accept, only the caller's side destroys it (its loop may be posting to it), never the fabric.
     */
    void prepare(QueuePair queuePair) throws FabricException;

    /** One attempt of a fabric to create a queue pair of {@code spec}. */
    @FunctionalInterface
    interface Create<Q extends QueuePair> {
        Q create(QueuePairSpec spec) throws FabricException;
    }

    /**
     * How every fabric creates a connection's queue pair: asks {@code setup} for the spec, and on a refusal asks it
     * for a smaller one ({@link #afterRefusal}), at most {@link #MAX_CREATE_ATTEMPTS} creates in all.
     */
    static <Q extends QueuePair> Q createFitted(ConnectionSetup setup, FabricDevice device, Create<Q> create)
            throws FabricException {
        QueuePairSpec spec = setup.queuePairSpec(device);
        for (int attempt = 1; ; attempt++) {
            try {
                return create.create(spec);
            } catch (QueuePairRefusedException refused) {
                QueuePairSpec smaller = attempt < MAX_CREATE_ATTEMPTS ? setup.afterRefusal(device, spec, refused)
                        : null;
                if (smaller == null) {
                    throw refused;
                }
                spec = smaller;
            }
        }
    }
}
