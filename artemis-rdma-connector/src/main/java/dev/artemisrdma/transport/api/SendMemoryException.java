package dev.artemisrdma.transport.api;

import dev.artemisrdma.transport.fabric.FabricException;

/**
 * {@link RdmaChannel#allocate} could not get a send buffer in registered memory: the transport's
 * {@code maxRegisteredMemory} is reached (or the device refused the registration). Nothing was allocated and the
 * channel is unharmed; the message names the connection, the peer, the size and the key that raises the bound. A
 * caller that cannot wait or fall back fails its own connection with it (the Artemis connection does).
 */
public final class SendMemoryException extends IllegalStateException {

    public SendMemoryException(String message, FabricException cause) {
        super(message, cause);
    }
}
