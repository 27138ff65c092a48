package dev.artemisrdma.transport.fabric;

import java.net.InetSocketAddress;

/** A listening rdma_cm id. Closing it stops new connections; established ones are not affected. */
public interface FabricListener extends AutoCloseable {

    /** The bound address (with the real port when 0 was asked for). */
    InetSocketAddress localAddress();

    /**
     * Connection requests for this listener that the fabric refused before reading them, because their host already
     * had too many waiting (a flood): they never reach the {@link ConnectionRequestHandler}, so whoever counts the
     * answered ones adds these.
     */
    default long requestsRefusedUnread() {
        return 0;
    }

    @Override
    void close();
}
