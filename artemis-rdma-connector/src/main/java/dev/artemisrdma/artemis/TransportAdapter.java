package dev.artemisrdma.artemis;

import java.net.InetSocketAddress;

import dev.artemisrdma.transport.ChannelAcceptor;
import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.api.TlsEngineFactory;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.Fabric;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.stats.LoopStats;

/** {@link ChannelTransport} on the transport protocol, {@link RdmaTransport}. */
final class TransportAdapter implements ChannelTransport {

    private final RdmaTransport transport;

    private TransportAdapter(RdmaTransport transport) {
        this.transport = transport;
    }

    /** Opens a transport on {@code fabric} with {@code config}. */
    static ChannelTransport open(Fabric fabric, TransportConfig config) {
        return new TransportAdapter(RdmaTransport.create(fabric, config));
    }

    @Override
    public RdmaServer listen(InetSocketAddress address, ChannelAcceptor acceptor) throws FabricException {
        return transport.listen(address, acceptor);
    }

    @Override
    public RdmaChannel connect(InetSocketAddress address, ChannelHandler handler) throws FabricException {
        return transport.connect(address, handler);
    }

    @Override
    public RdmaServer listen(InetSocketAddress address, ChannelAcceptor acceptor, TlsEngineFactory tls)
            throws FabricException {
        return transport.listen(address, acceptor, tls);
    }

    @Override
    public RdmaChannel connect(InetSocketAddress address, ChannelHandler handler, TlsEngineFactory tls)
            throws FabricException {
        return transport.connect(address, handler, tls);
    }

    @Override
    public long sendPoolBytes() {
        return transport.sendPoolBytes();
    }

    @Override
    public long sharedReceivePoolBytes() {
        return transport.sharedReceivePoolBytes();
    }

    @Override
    public int sharedReceivePools() {
        return transport.sharedReceivePools();
    }

    @Override
    public long sharedReceiveCreditsRecalled() {
        return transport.sharedReceiveCreditsRecalled();
    }

    @Override
    public long sharedReceiveRecalls() {
        return transport.sharedReceiveRecalls();
    }

    @Override
    public LoopStats loopStats() {
        return transport.loopStats();
    }

    @Override
    public void close() {
        transport.close();
    }

    @Override
    public String toString() {
        return transport.toString();
    }
}
