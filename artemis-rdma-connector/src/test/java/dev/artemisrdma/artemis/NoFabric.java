package dev.artemisrdma.artemis;

import java.net.InetSocketAddress;
import java.util.function.Supplier;

import dev.artemisrdma.transport.Addressing;
import dev.artemisrdma.transport.ConnectOptions;
import dev.artemisrdma.transport.ConnectionRequestHandler;
import dev.artemisrdma.transport.ConnectionSetup;
import dev.artemisrdma.transport.Fabric;
import dev.artemisrdma.transport.FabricListener;
import dev.artemisrdma.transport.QueuePair;
import dev.artemisrdma.transport.QueuePairEvents;

/** A fabric for runs where {@link LoopbackTransport} stands in for the transport: never used, only closed. */
public final class NoFabric implements Fabric, Supplier<Fabric> {

    @Override
    public Fabric get() {
        return new NoFabric();
    }

    @Override
    public FabricListener listen(InetSocketAddress bindAddress, Addressing addressing,
                                 ConnectionRequestHandler handler) {
        throw new UnsupportedOperationException("the loopback test transport needs no fabric");
    }

    @Override
    public QueuePair connect(InetSocketAddress remote, ConnectionSetup setup, ConnectOptions options,
                             QueuePairEvents events) {
        throw new UnsupportedOperationException("the loopback test transport needs no fabric");
    }

    @Override
    public void close() {
    }
}
