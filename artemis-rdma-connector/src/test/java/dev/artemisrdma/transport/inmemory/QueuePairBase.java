/*
 * What every in-memory queue pair is before its fabric's rules: its number, the caps its device granted, its two
 * addresses and the peer's private data (rdma_cm's), as QueuePair reports them. Immutable but for the private data,
 * written once by the connection's set-up (on the connection-manager or connecting thread) before the queue pair is
 * handed to the transport.
 */
package dev.artemisrdma.transport.inmemory;

import java.net.InetSocketAddress;

import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairCaps;

public abstract class QueuePairBase<D extends FabricDevice> implements QueuePair {
    public final D device;
    public final int qpn;
    public final QueuePairCaps caps;
    public final InetSocketAddress local;
    public final InetSocketAddress remote;
    public volatile byte[] peerPrivateData = new byte[0];

    protected QueuePairBase(D device, int qpn, QueuePairCaps caps, InetSocketAddress local,
                            InetSocketAddress remote) {
        this.device = device;
        this.qpn = qpn;
        this.caps = caps;
        this.local = local;
        this.remote = remote;
    }

    @Override
    public final FabricDevice device() {
        return device;
    }

    @Override
    public final QueuePairCaps caps() {
        return caps;
    }

    @Override
    public final int qpNumber() {
        return qpn;
    }

    @Override
    public final InetSocketAddress localAddress() {
        return local;
    }

    @Override
    public final InetSocketAddress peerAddress() {
        return remote;
    }

    @Override
    public final byte[] peerPrivateData() {
        return peerPrivateData.clone();
    }
}
