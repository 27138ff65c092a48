package dev.artemisrdma.transport.verbs;

import dev.artemisrdma.transport.*;

import dev.artemisrdma.verbs.CmEvent;
import dev.artemisrdma.verbs.CmEventType;
import dev.artemisrdma.verbs.RdmaCmId;
import dev.artemisrdma.verbs.VerbsException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;

/** A listening rdma_cm id; turns CONNECT_REQUEST events into {@link ConnectionRequest}s for the handler. */
final class VerbsListener implements FabricListener {

    private static final Logger LOG = LoggerFactory.getLogger(VerbsListener.class);
    private static final int BACKLOG = 128;

    private final VerbsFabric fabric;
    private final RdmaCmId id;
    private final ConnectionRequestHandler handler;
    private final InetSocketAddress localAddress;
    private boolean closed;

    private VerbsListener(VerbsFabric fabric, RdmaCmId id, ConnectionRequestHandler handler) {
        this.fabric = fabric;
        this.id = id;
        this.handler = handler;
        this.localAddress = id.localAddress();
    }

    static VerbsListener start(VerbsFabric fabric, InetSocketAddress bind, ConnectionRequestHandler handler)
            throws FabricException {
        RdmaCmId id;
        try {
            id = RdmaCmId.create(fabric.eventChannel());
        } catch (VerbsException e) {
            throw new FabricException("cannot listen on " + bind + ": " + e.getMessage(), e);
        }
        try {
            String host = bind.getAddress() != null ? bind.getAddress().getHostAddress() : bind.getHostString();
            id.bind(host, bind.getPort());
            id.listen(BACKLOG);
        } catch (VerbsException | RuntimeException e) {
            id.close();
            throw new FabricException("cannot listen on " + bind + ": " + e.getMessage()
                    + (e.getMessage() != null && e.getMessage().contains("EADDRNOTAVAIL")
                    ? " (no RDMA device has that address)" : ""), e);
        }
        VerbsListener listener = new VerbsListener(fabric, id, handler);
        fabric.route(id.address(), listener::onEvent);
        LOG.debug("listening on {}", listener.localAddress);
        return listener;
    }

    private void onEvent(CmEvent event) {
        if (event.type() != CmEventType.CONNECT_REQUEST) {
            if (event.type() == CmEventType.DEVICE_REMOVAL) {
                LOG.error("RDMA device of listener {} was removed; the listener no longer accepts connections",
                        localAddress);
            }
            return;
        }
        RdmaCmId requestId = RdmaCmId.adopt(event.id());
        VerbsConnectionRequest request;
        try {
            request = new VerbsConnectionRequest(fabric, requestId, event.privateData());
        } catch (FabricException e) {
            LOG.warn("refusing a connection request on {}: {}", localAddress, e.getMessage());
            try {
                requestId.reject(new byte[0]);
            } catch (VerbsException | RuntimeException ignored) {
                // destroyed below either way
            }
            requestId.close();
            return;
        }
        try {
            handler.onConnectionRequest(request);
        } catch (RuntimeException e) {
            LOG.warn("connection request from {} on {} failed: {}", request.peerAddress(), localAddress,
                    e.toString());
        } finally {
            request.rejectIfUndecided();
        }
    }

    @Override
    public InetSocketAddress localAddress() {
        return localAddress;
    }

    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        fabric.unroute(id.address());
        fabric.disown(this);
        id.close();
    }

    @Override
    public String toString() {
        return "listener " + localAddress;
    }
}
