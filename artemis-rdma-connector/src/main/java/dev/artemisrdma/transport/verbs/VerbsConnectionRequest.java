package dev.artemisrdma.transport.verbs;

import dev.artemisrdma.transport.fabric.ConnectionRequest;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.verbs.RdmaCmId;
import dev.artemisrdma.verbs.VerbsException;

import java.net.InetSocketAddress;

/** A CONNECT_REQUEST: a new rdma_cm id we own until we accept (it becomes a queue pair) or reject (destroyed). */
final class VerbsConnectionRequest implements ConnectionRequest {

    private final VerbsFabric fabric;
    private final RdmaCmId id;
    private final byte[] privateData;
    private final VerbsDevice device;
    private boolean decided;

    VerbsConnectionRequest(VerbsFabric fabric, RdmaCmId id, byte[] privateData) throws FabricException {
        this.fabric = fabric;
        this.id = id;
        this.privateData = privateData;
        this.device = fabric.deviceOf(id);
    }

    @Override
    public byte[] privateData() {
        return privateData.clone();
    }

    @Override
    public InetSocketAddress peerAddress() {
        return id.peerAddress();
    }

    @Override
    public InetSocketAddress localAddress() {
        return id.localAddress();
    }

    @Override
    public FabricDevice device() {
        return device;
    }

    @Override
    public synchronized QueuePair accept(ConnectionSetup setup, byte[] replyData, int rnrRetryCount,
                                         QueuePairEvents events) throws FabricException {
        if (decided) {
            throw new IllegalStateException("connection request already accepted or rejected");
        }
        decided = true;
        VerbsQueuePair qp = null;
        boolean handedOver = false;
        try {
            qp = new VerbsQueuePair(fabric, id, device, setup.queuePairSpec(device), privateData, events);
            fabric.route(id.address(), qp::onEvent);
            fabric.own(qp);
            fabric.track(qp, qp.portNumber());
            handedOver = true;
            setup.prepare(qp); // receives are posted before the peer can send
            id.accept(replyData, rnrRetryCount);
            return qp;
        } catch (VerbsException | FabricException | RuntimeException e) {
            try {
                id.reject(new byte[0]);
            } catch (VerbsException | RuntimeException ignored) {
                // the id is destroyed below
            }
            if (handedOver) {
                // the channel's now (ConnectionSetup.prepare): its abort destroys it, under its own lock, so no
                // post of its loop races the destroy
            } else if (qp != null) {
                qp.close();
            } else {
                fabric.unroute(id.address());
                id.close();
            }
            throw e instanceof FabricException fe ? fe
                    : new FabricException("accepting the connection from " + peerAddress() + " failed: "
                    + e.getMessage(), e);
        }
    }

    @Override
    public synchronized void reject(byte[] reason) {
        if (decided) {
            throw new IllegalStateException("connection request already accepted or rejected");
        }
        decided = true;
        try {
            id.reject(reason == null ? new byte[0] : reason);
        } catch (VerbsException e) {
            org.slf4j.LoggerFactory.getLogger(VerbsConnectionRequest.class).warn(
                    "rejecting the connection from {}: {}", peerAddress(), e.getMessage());
        } finally {
            id.close();
        }
    }

    synchronized void rejectIfUndecided() {
        if (!decided) {
            reject(new byte[0]);
        }
    }
}
