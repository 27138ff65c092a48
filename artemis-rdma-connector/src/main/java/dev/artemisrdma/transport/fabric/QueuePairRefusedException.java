package dev.artemisrdma.transport.fabric;

/**
 * The device refused to create a queue pair of the sizes asked (EINVAL from ibv_create_qp / rdma_create_qp): a
 * provider that allows fewer inline bytes, scatter-gather entries or work requests than asked, and does not say how
 * many it allows. {@link ConnectionSetup#afterRefusal} may answer with a smaller request.
 */
public class QueuePairRefusedException extends FabricException {

    public QueuePairRefusedException(String message, Throwable cause) {
        super(message, cause);
    }

    public QueuePairRefusedException(String message) {
        super(message);
    }
}
