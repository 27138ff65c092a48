/*
 * What every in-memory connection request is before its fabric's handshake (RDMA_CM_EVENT_CONNECT_REQUEST): the
 * connecting queue pair, the listener's address, the private data it carried, and the outcome the connecting thread
 * waits for (the waiting and its lock are the fabric's). The outcome is guarded by the fabric's lock or this
 * object's monitor, as the subclass says.
 */
package dev.artemisrdma.transport.inmemory;

import java.net.InetSocketAddress;

import dev.artemisrdma.transport.fabric.ConnectionRequest;

public abstract class RequestBase<Q extends QueuePairBase<?>> implements ConnectionRequest {
    public static final int PENDING = 0;
    public static final int ACCEPTED = 1;
    public static final int REJECTED = -1;
    /** The connecting side gave up waiting: a late accept fails. */
    public static final int ABANDONED = -2;

    public final Q active;
    public final InetSocketAddress listenerAddress;
    public final byte[] privateData;
    public int outcome = PENDING;
    public byte[] rejectData = new byte[0];

    protected RequestBase(Q active, InetSocketAddress listenerAddress, byte[] privateData) {
        this.active = active;
        this.listenerAddress = listenerAddress;
        this.privateData = privateData;
    }

    @Override
    public final byte[] privateData() {
        return privateData.clone();
    }

    @Override
    public final InetSocketAddress peerAddress() {
        return active.local;
    }

    @Override
    public final InetSocketAddress localAddress() {
        return listenerAddress;
    }
}
