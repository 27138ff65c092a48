package dev.artemisrdma.transport.verbs;

import dev.artemisrdma.transport.*;

import dev.artemisrdma.verbs.CmEvent;
import dev.artemisrdma.verbs.CmEventType;
import dev.artemisrdma.verbs.RdmaCmId;
import dev.artemisrdma.verbs.RdmaDevice;
import dev.artemisrdma.verbs.RdmaDevices;
import dev.artemisrdma.verbs.RdmaEventChannel;
import dev.artemisrdma.verbs.VerbsException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * The {@link Fabric} over the real verbs binding: one rdma_cm event channel with one connection-manager thread
 * that routes every event to the listener or connection whose rdma_cm_id it names.
 */
public final class VerbsFabric implements Fabric {

    private static final Logger LOG = LoggerFactory.getLogger(VerbsFabric.class);
    private static final int EVENT_POLL_MILLIS = 100;

    private final RdmaDevices devices;
    private final Map<RdmaDevice, VerbsDevice> deviceByContext = new ConcurrentHashMap<>(); // identity keys
    private final RdmaEventChannel eventChannel;
    private final Map<Long, Consumer<CmEvent>> routes = new ConcurrentHashMap<>();
    private final List<AutoCloseable> owned = new ArrayList<>();
    private final Thread cmThread;
    private volatile boolean closed;

    /** Opens every RDMA device and starts the connection-manager thread. */
    public VerbsFabric() throws FabricException {
        try {
            devices = RdmaDevices.open();
        } catch (VerbsException e) {
            throw new FabricException("cannot open RDMA devices: " + e.getMessage(), e);
        }
        try {
            eventChannel = new RdmaEventChannel();
        } catch (VerbsException e) {
            devices.close();
            throw new FabricException("cannot create the rdma_cm event channel: " + e.getMessage(), e);
        }
        for (RdmaDevice device : devices.all()) {
            deviceByContext.put(device, new VerbsDevice(device));
        }
        cmThread = new Thread(this::dispatchEvents, "rdma-cm-events");
        cmThread.setDaemon(true);
        cmThread.start();
    }

    /** The names of the devices this fabric opened. */
    public List<String> deviceNames() {
        return devices.names();
    }

    /**
     * The traffic class a connected queue pair of this fabric carries in its address vector (ibv_query_qp): on
     * RoCE, the IP type of service of its packets, which {@link Addressing#tos()} sets. For operators and tests
     * that want the device's word for it.
     */
    public int trafficClass(QueuePair queuePair) throws FabricException {
        if (!(queuePair instanceof VerbsQueuePair qp)) {
            throw new IllegalArgumentException("not a queue pair of the verbs fabric: " + queuePair);
        }
        return qp.trafficClass();
    }

    RdmaEventChannel eventChannel() {
        return eventChannel;
    }

    /** The device an id is bound to, or null while it is not (an id bound to a wildcard address). */
    String deviceNameOf(RdmaCmId id) throws FabricException {
        return id.verbsContext() == 0 ? null : deviceOf(id).name();
    }

    VerbsDevice deviceOf(RdmaCmId id) throws FabricException {
        try {
            RdmaDevice device = id.device(devices);
            return deviceByContext.get(device);
        } catch (VerbsException e) {
            throw new FabricException(e.getMessage(), e);
        }
    }

    void route(long idAddress, Consumer<CmEvent> handler) {
        routes.put(idAddress, handler);
    }

    void unroute(long idAddress) {
        routes.remove(idAddress);
    }

    synchronized void own(AutoCloseable resource) {
        owned.add(resource);
    }

    synchronized void disown(AutoCloseable resource) {
        owned.remove(resource);
    }

    @Override
    public FabricListener listen(InetSocketAddress bindAddress, Addressing addressing,
                                 ConnectionRequestHandler handler) throws FabricException {
        checkOpen();
        VerbsListener listener = VerbsListener.start(this, bindAddress, addressing, handler);
        own(listener);
        return listener;
    }

    @Override
    public QueuePair connect(InetSocketAddress remote, ConnectionSetup setup, ConnectOptions options,
                             QueuePairEvents events) throws FabricException {
        checkOpen();
        return VerbsConnector.connect(this, remote, setup, options, events);
    }

    private void dispatchEvents() {
        while (!closed) {
            CmEvent event;
            try {
                event = eventChannel.poll(EVENT_POLL_MILLIS);
            } catch (VerbsException e) {
                if (!closed) {
                    LOG.error("rdma_cm event channel failed; no more connection events will be handled: {}",
                            e.getMessage());
                }
                return;
            }
            if (event == null) {
                continue;
            }
            long target = event.type() == CmEventType.CONNECT_REQUEST ? event.listenId() : event.id();
            Consumer<CmEvent> handler = routes.get(target);
            if (handler == null) {
                if (event.type() == CmEventType.CONNECT_REQUEST) {
                    // A request for a listener that is closing: refuse it and free its id.
                    RdmaCmId orphan = RdmaCmId.adopt(event.id());
                    try {
                        orphan.reject(new byte[0]);
                    } catch (VerbsException | RuntimeException ignored) {
                        // the id is destroyed right after
                    }
                    orphan.close();
                } else {
                    LOG.debug("rdma_cm event {} for an id that is already gone", event);
                }
                continue;
            }
            try {
                handler.accept(event);
            } catch (RuntimeException e) {
                LOG.error("handling rdma_cm event {} failed", event, e);
            }
        }
    }

    private void checkOpen() throws FabricException {
        if (closed) {
            throw new FabricException("the RDMA fabric is closed");
        }
    }

    boolean isClosed() {
        return closed;
    }

    /** Closes listeners and connections still open, stops the event thread, then releases the devices. */
    @Override
    public void close() {
        List<AutoCloseable> toClose;
        synchronized (this) {
            if (closed) {
                return;
            }
            toClose = new ArrayList<>(owned);
            owned.clear();
        }
        for (int i = toClose.size() - 1; i >= 0; i--) {
            try {
                toClose.get(i).close();
            } catch (Exception e) {
                LOG.warn("closing {} failed: {}", toClose.get(i), e.getMessage());
            }
        }
        closed = true;
        try {
            cmThread.join(2000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        eventChannel.close();
        for (VerbsDevice device : deviceByContext.values()) {
            device.closeResources();
        }
        devices.close();
    }
}
