package dev.artemisrdma.transport.fabric;

import java.net.InetSocketAddress;

/** A listening rdma_cm id. Closing it stops new connections; established ones are not affected. */
public interface FabricListener extends AutoCloseable {

    /** The bound address (with the real port when 0 was asked for). */
    InetSocketAddress localAddress();

    @Override
    void close();
}
