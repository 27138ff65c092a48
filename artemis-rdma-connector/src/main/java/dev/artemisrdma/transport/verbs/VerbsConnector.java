package dev.artemisrdma.transport.verbs;

import dev.artemisrdma.transport.fabric.AddressingException;
import dev.artemisrdma.transport.fabric.ConnectOptions;
import dev.artemisrdma.transport.fabric.ConnectionRejectedException;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.Endpoints;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.verbs.CmEvent;
import dev.artemisrdma.verbs.Errno;
import dev.artemisrdma.verbs.RdmaCmId;
import dev.artemisrdma.verbs.VerbsException;

import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The active side of rdma_cm as a small state machine driven by events on the fabric's thread:
 * resolve address, resolve route, create the queue pair (receives posted), connect, established. Every error
 * event ends it with a message, and the caller's wait is bounded by the connect timeout.
 */
final class VerbsConnector {

    private final VerbsFabric fabric;
    private final RdmaCmId id;
    private final InetSocketAddress remote;
    private final ConnectionSetup setup;
    private final ConnectOptions options;
    private final QueuePairEvents events;
    private final CompletableFuture<VerbsQueuePair> result = new CompletableFuture<>();
    private final int stepTimeoutMillis;
    private VerbsQueuePair qp;

    private VerbsConnector(VerbsFabric fabric, RdmaCmId id, InetSocketAddress remote, ConnectionSetup setup,
                           ConnectOptions options, QueuePairEvents events) {
        this.fabric = fabric;
        this.id = id;
        this.remote = remote;
        this.setup = setup;
        this.options = options;
        this.events = events;
        this.stepTimeoutMillis = (int) Math.max(100, Math.min(Integer.MAX_VALUE, options.timeout().toMillis()));
    }

    static QueuePair connect(VerbsFabric fabric, InetSocketAddress remote, ConnectionSetup setup,
                             ConnectOptions options, QueuePairEvents events) throws FabricException {
        options.addressing().requireKnownDevice(fabric.deviceNames());
        RdmaCmId id;
        try {
            id = RdmaCmId.create(fabric.eventChannel());
        } catch (VerbsException e) {
            throw new FabricException("cannot connect to " + Endpoints.describe(remote) + ": " + e.getMessage(),
                    e);
        }
        VerbsConnector connector = new VerbsConnector(fabric, id, remote, setup, options, events);
        return connector.run();
    }

    private String target() {
        return Endpoints.describe(remote);
    }

    private String host() {
        return remote.getAddress() != null ? remote.getAddress().getHostAddress() : remote.getHostString();
    }

    /** What to check when no RDMA device can reach the target. */
    private AddressingException noRoute(String detail) {
        return new AddressingException("no RDMA device has a route to " + target() + " (" + detail + "): check "
                + "'rdma link' (an RDMA device must sit on the interface that reaches it) and 'ip route get "
                + host() + "'");
    }

    private QueuePair run() throws FabricException {
        fabric.route(id.address(), this::onEvent);
        try {
            if (options.addressing().hasTos()) {
                id.setTypeOfService(options.addressing().tos()); // before rdma_resolve_route puts it in the path
            }
            // any time before rdma_connect: the kernel puts it into the queue pair's attributes at RTS
            id.setAckTimeout(options.addressing().ackTimeout());
            id.resolveAddress(host(), remote.getPort(), stepTimeoutMillis);
        } catch (VerbsException | RuntimeException e) {
            abandon();
            if (e instanceof VerbsException ve && isUnroutable(ve.errno())) {
                throw noRoute(e.getMessage());
            }
            throw new FabricException("cannot connect to " + target() + ": " + e.getMessage(), e);
        }
        try {
            return result.get(options.timeout().toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            abandon();
            throw new FabricException("connecting to " + target() + " timed out after "
                    + options.timeout().toMillis() + " ms (is a listener running there, and is the address on an "
                    + "RDMA device?)");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            abandon();
            throw new FabricException("interrupted while connecting to " + target());
        } catch (ExecutionException e) {
            abandon();
            Throwable cause = e.getCause();
            if (cause instanceof FabricException fe) {
                throw fe;
            }
            throw new FabricException("connecting to " + target() + " failed: " + cause, cause);
        }
    }

    /** rdma_resolve_addr's answers (immediate, or as an ADDR_ERROR status) for a target no device can reach. */
    private static boolean isUnroutable(int errno) {
        return errno == Errno.ENETUNREACH || errno == Errno.EHOSTUNREACH || errno == Errno.ENODEV
                || errno == Errno.EADDRNOTAVAIL;
    }

    /** With a device named, the one rdma_cm resolved the route to must be it. */
    private void checkDevice() throws FabricException {
        String wanted = options.addressing().device();
        String resolved = fabric.deviceNameOf(id);
        if (wanted != null && !wanted.equals(resolved)) {
            throw new AddressingException("connecting to " + target() + " with device=" + wanted + ": the route "
                    + "to it leaves through " + resolved + ", not " + wanted + "; connect to an address reached "
                    + "through " + wanted + "'s interface ('ip route get " + host() + "' shows the interface, "
                    + "'rdma link' its device), or leave device out");
        }
    }

    /**
     * Releases what is still ours after a failure or timeout; a late event then finds no route. A queue pair handed to
     * {@link ConnectionSetup#prepare} is the channel's, which destroys it in its abort (the transport's connect runs
     * it on every failure), under its own lock: destroying it here could race a post of its loop.
     */
    private synchronized void abandon() {
        result.cancel(false);
        fabric.unroute(id.address());
        if (qp == null) {
            id.close();
        }
    }

    private synchronized void onEvent(CmEvent event) {
        if (result.isDone()) {
            // connected: later events (disconnect, device removal) belong to the queue pair
            if (qp != null && !result.isCancelled() && !result.isCompletedExceptionally()) {
                qp.onEvent(event);
            }
            return;
        }
        try {
            switch (event.type()) {
                case ADDR_RESOLVED -> {
                    checkDevice();
                    id.resolveRoute(stepTimeoutMillis);
                }
                case ROUTE_RESOLVED -> {
                    VerbsDevice device = fabric.deviceOf(id);
                    qp = ConnectionSetup.createFitted(setup, device,
                            spec -> new VerbsQueuePair(fabric, id, device, spec, null, events));
                    setup.prepare(qp);
                    id.connect(options.privateData(), options.retryCount(), options.rnrRetryCount());
                }
                case ESTABLISHED -> {
                    qp.setPeerPrivateData(event.privateData());
                    qp.markEstablished();
                    fabric.route(id.address(), qp::onEvent);
                    fabric.own(qp);
                    fabric.track(qp, qp.portNumber(), options.addressing().retryBudget(options.retryCount()));
                    result.complete(qp);
                }
                case REJECTED -> fail(new ConnectionRejectedException("connection to " + target()
                        + " was rejected" + rejectHint(event), remote, event.privateData()));
                case ADDR_ERROR -> fail(noRoute("RDMA_CM_EVENT_ADDR_ERROR, status " + event.status()
                        + (event.status() < 0 ? " " + Errno.describe(-event.status()) : "")));
                case ROUTE_ERROR -> fail(new FabricException("no route to " + target()
                        + " (RDMA_CM_EVENT_ROUTE_ERROR, status " + event.status() + ")"));
                case UNREACHABLE -> fail(new FabricException(target() + " is unreachable "
                        + "(RDMA_CM_EVENT_UNREACHABLE, status " + event.status() + ")"));
                case CONNECT_ERROR -> fail(new FabricException("connecting to " + target() + " failed "
                        + "(RDMA_CM_EVENT_CONNECT_ERROR, status " + event.status() + ")"));
                case DEVICE_REMOVAL -> {
                    String device = qp != null ? qp.device().name() : fabric.deviceNameOf(id);
                    fail(new FabricException("RDMA device " + device + " was removed while connecting to " + target()
                            + " (RDMA_CM_EVENT_DEVICE_REMOVAL)"));
                    if (device != null) {
                        fabric.deviceGone(device, "RDMA device " + device + " was removed "
                                + "(RDMA_CM_EVENT_DEVICE_REMOVAL)");
                    }
                }
                default -> {
                    // CONNECT_RESPONSE does not occur when rdma_cm owns the queue pair; others do not apply
                }
            }
        } catch (VerbsException | FabricException | RuntimeException e) {
            fail(e instanceof FabricException fe ? fe
                    : new FabricException("connecting to " + target() + " failed: " + e.getMessage(), e));
        }
    }

    private void fail(FabricException e) {
        result.completeExceptionally(e);
    }

    /** IB CM reject reason 28: no listener for the service id (rdma_cm's port) at the peer. */
    private static final int REJ_INVALID_SERVICE_ID = 28;
    /** IB CM reject reason 8: refused above the CM: by the peer's application, or by rdma_cm itself. */
    private static final int REJ_CONSUMER_DEFINED = 8;

    /**
     * What a reject says when it carries no reason of ours. A request for a port nobody listens on is refused by the
     * peer's rdma_cm (no listener to hand it to) with reason 8 and nothing in the private data: on RoCE the REJ's
     * whole private data area, 148 zero bytes; some fabrics answer reason 28 instead. A reject of ours always
     * carries our reason, so an all-zero one means nobody listens (or the listener is going away).
     */
    private static String rejectHint(CmEvent event) {
        boolean noData = true;
        for (byte b : event.privateData()) {
            noData &= b == 0;
        }
        if (event.status() == REJ_INVALID_SERVICE_ID || (event.status() == REJ_CONSUMER_DEFINED && noData)) {
            return " (nobody listens on that RDMA port: the peer's connection manager refused the request, reject "
                    + "reason " + event.status() + ", with no reason of ours; check that the RDMA acceptor is started "
                    + "on that address and port)";
        }
        return event.status() == REJ_CONSUMER_DEFINED ? "" : " (reject reason " + event.status() + ")";
    }
}
