package dev.artemisrdma.transport.verbs;

import dev.artemisrdma.transport.fabric.Addressing;
import dev.artemisrdma.transport.fabric.AddressingException;
import dev.artemisrdma.transport.fabric.ConnectionRequest;
import dev.artemisrdma.transport.fabric.ConnectionRequestHandler;
import dev.artemisrdma.transport.fabric.Endpoints;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.FabricListener;
import dev.artemisrdma.transport.fabric.ListenerRecovery;
import dev.artemisrdma.transport.fabric.LogLimiter;
import dev.artemisrdma.verbs.CmEvent;
import dev.artemisrdma.verbs.CmEventType;
import dev.artemisrdma.verbs.Errno;
import dev.artemisrdma.verbs.RdmaCmId;
import dev.artemisrdma.verbs.VerbsException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

import java.net.InetSocketAddress;
import java.util.concurrent.atomic.LongAdder;

/**
 * A listening rdma_cm id; turns CONNECT_REQUEST events into {@link ConnectionRequest}s for the handler, and binds
 * again when its device goes away and comes back.
 *
 * <p>Threads: the fabric's rdma_cm event thread delivers its events ({@link #onEvent}, which calls the handler and
 * loses the id), the fabric's timer thread rebinds it ({@link ListenerRecovery}), its owner closes it from any thread.
 * The listening id, its device name and {@code closed} are guarded by this object's lock; the id is closed outside
 * it, after being taken out under it.
 */
final class VerbsListener implements FabricListener {

    private static final Logger LOG = LoggerFactory.getLogger(VerbsListener.class);
    // what a peer can make us log at will: LogLimiter.LINES lines per site and interval, then a summary
    private static final LogLimiter REFUSED = LogLimiter.site(LOG, Level.WARN, "connection requests refused unread");
    private static final LogLimiter FAILED = LogLimiter.site(LOG, Level.WARN, "connection requests that failed");
    /**
     * Connection requests the kernel holds for us before it drops more (ucma caps it at
     * {@code /proc/sys/net/rdma_ucm/max_backlog}, 1024 by default): the event thread reads them all into its fair
     * queues at once, so a flood does not make the kernel drop another host's request.
     */
    private static final int BACKLOG = 1024;

    private final VerbsFabric fabric;
    private final ConnectionRequestHandler handler;
    private final InetSocketAddress localAddress;
    private final Addressing addressing;
    private final ListenerRecovery recovery;
    /** Where the fabric's event thread delivers this listener's events and counts its requests refused unread. */
    private final VerbsFabric.ListenerRoute route = new VerbsFabric.ListenerRoute() {
        @Override
        public void accept(CmEvent event) {
            onEvent(event);
        }

        @Override
        public void refusedUnread() {
            refusedUnread.increment();
        }
    };
    private final LongAdder refusedUnread = new LongAdder();
    /** The listening id; null while the listener is lost (its device went away) and recovering. */
    private RdmaCmId id;
    private String deviceName;
    private boolean closed;

    private VerbsListener(VerbsFabric fabric, RdmaCmId id, Addressing addressing, ConnectionRequestHandler handler) {
        this.fabric = fabric;
        this.id = id;
        this.addressing = addressing;
        this.handler = handler;
        this.localAddress = id.localAddress();
        this.recovery = new ListenerRecovery("listener " + Endpoints.describe(localAddress), fabric.timer(),
                this::rebind);
    }

    /**
     * Binds and listens. With a device named, a specific bind address must be one of that device's (a wildcard
     * listens on every device; the transport then accepts only connections that arrive on the named one).
     */
    static VerbsListener start(VerbsFabric fabric, InetSocketAddress bind, Addressing addressing,
                               ConnectionRequestHandler handler) throws FabricException {
        addressing.requireKnownDevice(fabric.deviceNames());
        RdmaCmId id = bindAndListen(fabric, bind, addressing);
        VerbsListener listener = new VerbsListener(fabric, id, addressing, handler);
        synchronized (listener) {
            listener.deviceName = fabric.deviceNameOf(id);
            fabric.route(id.address(), listener.route);
        }
        LOG.debug("listening on {}", listener.localAddress);
        return listener;
    }

    private static RdmaCmId bindAndListen(VerbsFabric fabric, InetSocketAddress bind, Addressing addressing)
            throws FabricException {
        String where = Endpoints.describe(bind);
        RdmaCmId id;
        try {
            id = RdmaCmId.create(fabric.eventChannel());
        } catch (VerbsException e) {
            throw new FabricException("cannot listen on " + where + ": " + e.getMessage(), e);
        }
        String host = bind.getAddress() != null ? bind.getAddress().getHostAddress() : bind.getHostString();
        try {
            if (addressing.hasTos()) {
                id.setTypeOfService(addressing.tos());
            }
            id.bind(host, bind.getPort());
            String bound = fabric.deviceNameOf(id);
            if (addressing.hasDevice() && bound != null && !bound.equals(addressing.device())) {
                throw new AddressingException("cannot listen on " + where + " with device=" + addressing.device()
                        + ": " + host + " is an address of " + bound + ", not of " + addressing.device()
                        + "; use an address of " + addressing.device() + "'s interface ('rdma link' names it, "
                        + "'ip addr show dev <interface>' lists its addresses), or 0.0.0.0 to listen everywhere");
            }
            id.listen(BACKLOG);
        } catch (VerbsException | FabricException | RuntimeException e) {
            id.close();
            if (e instanceof FabricException fe) {
                throw fe;
            }
            if (e instanceof VerbsException ve && isNotLocal(ve.errno())) {
                throw new AddressingException("cannot listen on " + where + ": no RDMA device has the address "
                        + host + " (" + e.getMessage() + "); use an address of an RDMA device's interface ('rdma "
                        + "link' lists the devices and their interfaces, 'ip addr' their addresses), or 0.0.0.0 / "
                        + ":: to listen on every device", e);
            }
            throw new FabricException("cannot listen on " + where + ": " + e.getMessage(), e);
        }
        return id;
    }

    /** Recovery: the same address and port again, on whatever device now has the address. */
    private void rebind() throws FabricException {
        RdmaCmId fresh = bindAndListen(fabric, localAddress, addressing);
        String name;
        try {
            name = fabric.deviceNameOf(fresh);
        } catch (FabricException | RuntimeException e) {
            fresh.close();
            throw e;
        }
        synchronized (this) {
            if (closed) {
                fresh.close();
                return;
            }
            id = fresh;
            deviceName = name;
            fabric.route(fresh.address(), route);
        }
    }

    @Override
    public long requestsRefusedUnread() {
        return refusedUnread.sum();
    }

    /** A port came up: a lost listener need not wait for its next periodic attempt. */
    void retryIfLost() {
        recovery.retryNow();
    }

    /** rdma_bind_addr's answer for an address that is not a local address of an RDMA device. */
    private static boolean isNotLocal(int errno) {
        return errno == Errno.EADDRNOTAVAIL || errno == Errno.ENODEV;
    }

    private void onEvent(CmEvent event) {
        if (event.type() == CmEventType.DEVICE_REMOVAL || event.type() == CmEventType.ADDR_CHANGE) {
            lose(event);
            return;
        }
        if (event.type() != CmEventType.CONNECT_REQUEST) {
            return;
        }
        RdmaCmId requestId = RdmaCmId.adopt(event.id());
        VerbsConnectionRequest request;
        try {
            request = new VerbsConnectionRequest(fabric, requestId, event.privateData(), addressing);
        } catch (FabricException e) {
            if (REFUSED.admit()) {
                LOG.warn("refusing a connection request on {}: {}", localAddress, e.getMessage());
            }
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
            if (FAILED.admit()) {
                LOG.warn("connection request from {} on {} failed: {}", request.peerAddress(), localAddress,
                        e.toString());
            }
        } finally {
            request.rejectIfUndecided();
        }
    }

    @Override
    public InetSocketAddress localAddress() {
        return localAddress;
    }

    /**
     * The device under the listening id went away (or its address moved): rdma_cm requires the id destroyed (the
     * event is already acknowledged, so rdma_destroy_id does not wait), then bind+listen is retried until it works.
     */
    private void lose(CmEvent event) {
        String device;
        synchronized (this) {
            if (closed || id == null) {
                return;
            }
            fabric.unroute(id.address());
            id.close();
            id = null;
            device = deviceName;
        }
        String reason = event.type() == CmEventType.DEVICE_REMOVAL
                ? "RDMA device " + device + " was removed (" + event.type().cName() + ")"
                : "its address moved (" + event.type().cName() + ")";
        if (event.type() == CmEventType.DEVICE_REMOVAL && device != null) {
            fabric.deviceGone(device, reason);
        }
        recovery.lost(reason);
    }

    /** Whether the listener is waiting for its device to come back. */
    boolean isLost() {
        return recovery.isLost();
    }

    @Override
    public void close() {
        RdmaCmId current;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            current = id;
            id = null;
        }
        recovery.cancel();
        fabric.disown(this);
        if (current != null) {
            fabric.unroute(current.address());
            current.close();
        }
    }

    @Override
    public String toString() {
        return "listener " + localAddress;
    }
}
