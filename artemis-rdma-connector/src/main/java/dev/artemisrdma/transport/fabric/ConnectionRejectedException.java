package dev.artemisrdma.transport.fabric;

import java.net.InetSocketAddress;

/**
 * {@link Fabric#connect} failed because the peer rejected the request (RDMA_CM_EVENT_REJECTED). Carries the
 * reject private data the peer passed to {@link ConnectionRequest#reject}, so the protocol layer above can decode
 * the reason.
 */
public class ConnectionRejectedException extends FabricException {

    private final InetSocketAddress peer;
    private final byte[] rejectData;

    public ConnectionRejectedException(InetSocketAddress peer, byte[] rejectData) {
        this("connection rejected by " + peer, peer, rejectData);
    }

    public ConnectionRejectedException(String message, InetSocketAddress peer, byte[] rejectData) {
        super(message);
        this.peer = peer;
        this.rejectData = rejectData == null ? new byte[0] : rejectData.clone();
    }

    public InetSocketAddress peer() {
        return peer;
    }

    /** The reject private data (empty when the peer, or the network, sent none). */
    public byte[] rejectData() {
        return rejectData.clone();
    }
}
