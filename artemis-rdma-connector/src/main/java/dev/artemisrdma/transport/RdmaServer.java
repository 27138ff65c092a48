package dev.artemisrdma.transport;

import java.net.InetSocketAddress;

import dev.artemisrdma.transport.fabric.FabricListener;

/** A listening endpoint of an {@link RdmaTransport}. Closing it stops new connections; accepted ones live on. */
public final class RdmaServer implements AutoCloseable {

    private final FabricListener listener;
    private final Runnable onClose;
    private final ListenerStats stats;

    RdmaServer(FabricListener listener, Runnable onClose, ListenerStats stats) {
        this.listener = listener;
        this.onClose = onClose;
        this.stats = stats;
    }

    /** How the connection requests that reached this server were answered. */
    public ListenerStats stats() {
        return stats;
    }

    /** The bound address, with the real port when 0 was asked for. */
    public InetSocketAddress localAddress() {
        return listener.localAddress();
    }

    @Override
    public void close() {
        listener.close();
        onClose.run();
    }

    @Override
    public String toString() {
        return "RdmaServer[" + RdmaTransport.describe(localAddress()) + "]";
    }
}
