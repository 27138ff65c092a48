package dev.artemisrdma.transport;

/** The peer refused the connection (RDMA_CM_EVENT_REJECTED); {@link #reason()} is its reject private data. */
public class ConnectionRejectedException extends FabricException {

    private final byte[] reason;

    public ConnectionRejectedException(String message, byte[] reason) {
        super(message);
        this.reason = reason == null ? new byte[0] : reason.clone();
    }

    public byte[] reason() {
        return reason.clone();
    }
}
