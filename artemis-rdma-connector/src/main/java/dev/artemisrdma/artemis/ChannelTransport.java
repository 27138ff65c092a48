package dev.artemisrdma.artemis;

import java.net.InetSocketAddress;
import java.util.function.Function;

import dev.artemisrdma.transport.ChannelHandler;
import dev.artemisrdma.transport.FabricException;
import dev.artemisrdma.transport.RdmaChannel;

/** What the Artemis adapters need from the transport: listen and connect. One instance is shared per settings. */
interface ChannelTransport extends AutoCloseable {

    /** Listens on {@code address}; each accepted channel gets the handler {@code onAccepted} returns for it. */
    AutoCloseable listen(InetSocketAddress address, Function<RdmaChannel, ChannelHandler> onAccepted)
            throws FabricException;

    /** Connects to a listener, blocking until connected, refused or timed out. */
    RdmaChannel connect(InetSocketAddress address, ChannelHandler handler) throws FabricException;

    /** Bytes registered by the transport's shared send buffer pools (monitoring); 0 when it has none. */
    default long sendPoolBytes() {
        return 0;
    }

    @Override
    void close();

    /** Opens a transport with the given tuning settings on a fabric. */
    @FunctionalInterface
    interface Opener {
        ChannelTransport open(dev.artemisrdma.transport.Fabric fabric, java.util.Map<String, Object> settings)
                throws FabricException;
    }
}
