package dev.artemisrdma.transport;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;

/** Decides on each incoming connection of an {@link RdmaServer}. */
@FunctionalInterface
public interface ChannelAcceptor {

    /**
     * A peer passed the handshake; called on the fabric's connection-manager thread before any frame is delivered.
     * Returns the handler for the channel's events; returning null or throwing rejects the connection.
     */
    ChannelHandler onAccepted(RdmaChannel channel);
}
