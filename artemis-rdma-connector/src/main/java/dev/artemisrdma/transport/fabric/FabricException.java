package dev.artemisrdma.transport.fabric;

import java.io.IOException;

/** A failed RDMA operation. The message names the operation, the peer where known, and the cause. */
public class FabricException extends IOException {

    public FabricException(String message) {
        super(message);
    }

    public FabricException(String message, Throwable cause) {
        super(message, cause);
    }
}
