package dev.artemisrdma.transport.verbs;

import dev.artemisrdma.transport.fabric.Addressing;
import dev.artemisrdma.transport.fabric.ConnectionRequest;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.LogLimiter;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.verbs.RdmaCmId;
import dev.artemisrdma.verbs.VerbsException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

import java.net.InetSocketAddress;

/** A CONNECT_REQUEST: a new rdma_cm id we own until we accept (it becomes a queue pair) or reject (destroyed). */
final class VerbsConnectionRequest implements ConnectionRequest {

    private static final Logger LOG = LoggerFactory.getLogger(VerbsConnectionRequest.class);
    private static final LogLimiter REJECT_FAILED = LogLimiter.site(LOG, Level.WARN, "rejects that failed");

    private final VerbsFabric fabric;
    private final RdmaCmId id;
    private final byte[] privateData;
    private final VerbsDevice device;
    /** The listener's: its ACK timeout is set on this request's id, which does not inherit it. */
    private final Addressing addressing;
    private boolean decided;

    VerbsConnectionRequest(VerbsFabric fabric, RdmaCmId id, byte[] privateData, Addressing addressing)
            throws FabricException {
        this.fabric = fabric;
        this.id = id;
        this.privateData = privateData;
        this.addressing = addressing;
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
            qp = ConnectionSetup.createFitted(setup, device,
                    spec -> new VerbsQueuePair(fabric, id, device, spec, privateData, events));
            fabric.route(id.address(), qp::onEvent);
            fabric.own(qp);
            fabric.track(qp, qp.portNumber(), addressing.retryBudget(Addressing.ACCEPTED_RETRY_COUNT));
            handedOver = true;
            setup.prepare(qp); // receives are posted before the peer can send
            id.setAckTimeout(addressing.ackTimeout()); // rdma_accept moves the queue pair to RTS with it
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
            if (REJECT_FAILED.admit()) {
                LOG.warn("rejecting the connection from {}: {}", peerAddress(), e.getMessage());
            }
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
