package dev.artemisrdma.transport.fabric;

import java.net.InetSocketAddress;

/** A {@link ConnectionRequest} that forwards every call to another: subclasses override what they observe. */
public class ForwardingConnectionRequest implements ConnectionRequest {

    private final ConnectionRequest request;

    public ForwardingConnectionRequest(ConnectionRequest request) {
        this.request = request;
    }

    @Override
    public byte[] privateData() {
        return request.privateData();
    }

    @Override
    public InetSocketAddress peerAddress() {
        return request.peerAddress();
    }

    @Override
    public InetSocketAddress localAddress() {
        return request.localAddress();
    }

    @Override
    public FabricDevice device() {
        return request.device();
    }

    @Override
    public QueuePair accept(ConnectionSetup setup, byte[] replyData, int rnrRetryCount, QueuePairEvents events)
            throws FabricException {
        return request.accept(setup, replyData, rnrRetryCount, events);
    }

    @Override
    public void reject(byte[] reason) {
        request.reject(reason);
    }
}
