package dev.artemisrdma.transport;

import java.net.InetSocketAddress;

/**
 * {@link Fabric#connect} failed because the peer rejected the request (RDMA_CM_EVENT_REJECTED). Carries the
 * reject private data the peer passed to {@link ConnectionRequest#reject}, so the protocol layer above can decode
 * the reason.
 */
// Merge of main (VerbsConnector: message + private data) and transport (peer + private data); resolved on branch osgi.
public class ConnectionRejectedException extends FabricException {

    private final InetSocketAddress peer;
    private final byte[] rejectData;

    public ConnectionRejectedException(InetSocketAddress peer, byte[] rejectData) {
        super("connection rejected by " + peer);
        this.peer = peer;
        this.rejectData = rejectData == null ? new byte[0] : rejectData.clone();
    }

    public ConnectionRejectedException(String message, byte[] rejectData) {
        super(message);
        this.peer = null;
        this.rejectData = rejectData == null ? new byte[0] : rejectData.clone();
    }

    /** The peer that rejected, or null when the fabric did not name it. */
    public InetSocketAddress peer() {
        return peer;
    }

    /** The reject private data (empty when the peer, or the network, sent none). */
    public byte[] rejectData() {
        return rejectData.clone();
    }

    /** Same as {@link #rejectData()} (main's name). */
    public byte[] reason() {
        return rejectData();
    }
}
