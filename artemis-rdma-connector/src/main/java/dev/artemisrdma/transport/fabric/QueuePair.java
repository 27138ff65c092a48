package dev.artemisrdma.transport.fabric;

import java.net.InetSocketAddress;

/**
 * A reliable-connected queue pair with its rdma_cm id. Posting is single-threaded per queue pair; sends before
 * the connection is established fail without touching native code.
 */
public interface QueuePair extends AutoCloseable {

    FabricDevice device();

    QueuePairCaps caps();

    int qpNumber();

    InetSocketAddress localAddress();

    InetSocketAddress peerAddress();

    /** The private data the peer sent in its request (passive side) or its reply (active side). */
    byte[] peerPrivateData();

    boolean isEstablished();

    /**
     * The passive side: the peer's first SEND arrived before the connection manager reported the connection
     * established (its RTU is late or lost). The peer could only send once it had our reply, so the connection is up:
     * the queue pair takes sends from now on, and the connection manager is told (on verbs, rdma_notify with
     * IBV_EVENT_COMM_EST, as rdma_notify(3) asks), so that it does not give the connection up for a missing RTU.
     * Its ESTABLISHED event may still follow.
     */
    void establishedByPeer();

    /** Posts every send of {@code list} with one call; the list may be reused once this returns. */
    void postSend(SendList list) throws FabricException;

    /** Posts every receive of {@code list} with one call; the list may be reused once this returns. */
    void postRecv(RecvList list) throws FabricException;

    /**
     * Starts an orderly disconnect (rdma_disconnect). Outstanding work requests then complete with
     * {@link WcStatus#WR_FLUSH_ERR}; idempotent.
     */
    void disconnect();

    /**
     * Destroys the queue pair and its rdma_cm id. Call after every posted work request has completed (flushes
     * included): buffers they point at may be reused as soon as this returns. Idempotent.
     */
    @Override
    void close();

    /**
     * Runs {@code gone} once, after {@link #close}, when the fabric let go of everything the queue pair held, its
     * rdma_cm id included: on verbs the id's destroy waits for its CM messages (a minute for a DREQ nobody answers),
     * and the transport counts what waits against the peer's source. At once when that happened already; the
     * default is for a fabric that keeps nothing after close.
     */
    default void whenGone(Runnable gone) {
        gone.run();
    }
}
