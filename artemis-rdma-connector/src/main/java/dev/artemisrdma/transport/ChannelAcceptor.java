package dev.artemisrdma.transport;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;

/**
 * Decides on each incoming connection of an {@link RdmaServer}, in two steps, so that a peer that never finishes its
 * handshake costs the application nothing: {@link #admit} when the request arrives (refusing with a reason the peer
 * reads), {@link #onAccepted} only once the connection is established.
 */
@FunctionalInterface
public interface ChannelAcceptor {

    /**
     * A peer's request passed the transport's checks; called on the fabric's connection-manager thread before the
     * request is accepted. Throwing refuses it, the exception's message going to the peer as the reason. Nothing
     * may be created for the peer here: it has not finished connecting, and may never.
     */
    default void admit(RdmaChannel channel) {
    }

    /**
     * The connection is established: rdma_cm reported it, or the peer's first frame arrived, whichever came first.
     * Called once, on the channel's completion loop (never on the connection-manager thread, which serves every
     * connection: it may take its time), before any frame is delivered. Returns the handler for the channel's events; returning null or throwing closes the connection
     * (the peer sees it disconnected; it was told nothing else, since it is connected already).
     */
    ChannelHandler onAccepted(RdmaChannel channel);
}
