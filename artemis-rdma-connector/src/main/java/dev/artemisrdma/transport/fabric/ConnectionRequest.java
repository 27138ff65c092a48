package dev.artemisrdma.transport.fabric;

import java.net.InetSocketAddress;

/** A peer asking to connect, with the private data it sent in its rdma_cm connect request. */
public interface ConnectionRequest {

    /** The private data of the request (at most 56 bytes over RDMA_PS_TCP); never null. */
    byte[] privateData();

    InetSocketAddress peerAddress();

    InetSocketAddress localAddress();

    /** The device the request arrived on: the queue pair, its completion queue and its memory must live here. */
    FabricDevice device();

    /**
     * Creates the queue pair as {@code setup} says, lets it post its receives, and accepts with {@code replyData}
     * (at most 196 bytes). {@code rnrRetryCount} governs how the <em>peer's</em> sends to us are retried when no
     * receive is posted (0: fail at once, 7: retry forever). The returned queue pair is not yet established:
     * {@link QueuePairEvents#established} follows.
     */
    QueuePair accept(ConnectionSetup setup, byte[] replyData, int rnrRetryCount, QueuePairEvents events)
            throws FabricException;

    /** Refuses the connection; {@code reason} travels to the peer as reject private data (at most 148 bytes). */
    void reject(byte[] reason);
}
