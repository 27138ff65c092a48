package dev.artemisrdma.artemis;

import java.net.InetSocketAddress;

import dev.artemisrdma.transport.ChannelAcceptor;
import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.api.TlsEngineFactory;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.stats.LoopStats;

/** What the Artemis adapters need from the transport: listen and connect. One instance is shared per settings. */
interface ChannelTransport extends AutoCloseable {

    /**
     * Listens on {@code address}; {@code acceptor} admits each request (an exception refuses it with its message as
     * the reason) and makes the handler of each connection once it is established.
     */
    RdmaServer listen(InetSocketAddress address, ChannelAcceptor acceptor) throws FabricException;

    /** Listens as above, speaking TLS with engines from {@code tls} when it is not null. */
    RdmaServer listen(InetSocketAddress address, ChannelAcceptor acceptor, TlsEngineFactory tls)
            throws FabricException;

    /** Connects to a listener, blocking until connected, refused or timed out. */
    RdmaChannel connect(InetSocketAddress address, ChannelHandler handler) throws FabricException;

    /** Connects as above, speaking TLS with an engine from {@code tls} when it is not null. */
    RdmaChannel connect(InetSocketAddress address, ChannelHandler handler, TlsEngineFactory tls)
            throws FabricException;

    /** Bytes registered by the transport's shared send buffer pools (monitoring); 0 when it has none. */
    default long sendPoolBytes() {
        return 0;
    }

    /** Bytes registered by the shared receive pools of the transport's completion loops (monitoring). */
    default long sharedReceivePoolBytes() {
        return 0;
    }

    /** Receive credits idle connections gave back to shared pools that recalled them (monitoring). */
    default long sharedReceiveCreditsRecalled() {
        return 0;
    }

    /** Recalls the shared pools made (monitoring). */
    default long sharedReceiveRecalls() {
        return 0;
    }

    /** Shared receive pools in service (monitoring). */
    default int sharedReceivePools() {
        return 0;
    }

    /** What the transport's completion loops did (monitoring); none when it has none. */
    default LoopStats loopStats() {
        return LoopStats.NONE;
    }

    @Override
    void close();
}
