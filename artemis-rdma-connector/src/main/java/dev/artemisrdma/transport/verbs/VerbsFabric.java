package dev.artemisrdma.transport.verbs;

import dev.artemisrdma.transport.fabric.Addressing;
import dev.artemisrdma.transport.fabric.ConnectOptions;
import dev.artemisrdma.transport.fabric.ConnectionRequestHandler;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.DeviceEvent;
import dev.artemisrdma.transport.fabric.DeviceEventRouter;
import dev.artemisrdma.transport.fabric.DeviceListener;
import dev.artemisrdma.transport.fabric.Endpoints;
import dev.artemisrdma.transport.fabric.Fabric;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.FabricListener;
import dev.artemisrdma.transport.fabric.FairRequestQueue;
import dev.artemisrdma.transport.fabric.ListenerRecovery;
import dev.artemisrdma.transport.fabric.LogLimiter;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.fabric.SourceAddresses;
import dev.artemisrdma.verbs.AsyncEventReader;
import dev.artemisrdma.verbs.CmEvent;
import dev.artemisrdma.verbs.CmEventType;
import dev.artemisrdma.verbs.IbvAsyncEvent;
import dev.artemisrdma.verbs.RdmaCmId;
import dev.artemisrdma.verbs.RdmaDevice;
import dev.artemisrdma.verbs.RdmaDevices;
import dev.artemisrdma.verbs.RdmaEventChannel;
import dev.artemisrdma.verbs.VerbsException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * The {@link Fabric} over the real verbs binding: one rdma_cm event channel with one connection-manager thread
 * that routes every event to the listener or connection whose rdma_cm_id it names.
 *
 * <p>Device events: one more thread per fabric ({@code rdma-async-events}) reads the verbs async events of every
 * device context (ibv_get_async_event, one poll(2) over all their non-blocking async fds) and maps them through a
 * {@link DeviceEventRouter}: fatal device and queue pair errors fail the connections they hit at once; a port that
 * goes down fails its connections only if it is still down when their retry budget (retryCount and ackTimeout) ran
 * out, so a link flap shorter than that costs no connection.
 * A thread of its own rather than the connection-manager thread: a connection request may keep that thread busy
 * (accepting registers memory), and a port-down must not wait behind a burst of requests; async events are rare, so
 * one thread for all devices is enough. The same thread rescans the device list: that is how a removed device that
 * carries no rdma_cm id of ours is noticed (on rxe the kernel waits, without an event, until every process has
 * closed the device), and how a device added later becomes usable. Every {@value #IDLE_RESCAN_MILLIS} ms while
 * nothing is under way, every {@value #BUSY_RESCAN_MILLIS} ms while a removal, a lost device or a deferred destroy
 * is (whoever starts one wakes the thread): an idle broker's event threads wake rarely.
 *
 * <p>A removed device (RDMA_CM_EVENT_DEVICE_REMOVAL, or gone from the rescanned list) fails its connections, tells
 * the {@link DeviceListener} (the transport), which releases its completion queues and memory there and calls
 * {@link #releaseDevice}; then our protection domain is freed and the next rescan lets librdmacm close the context,
 * which lets the kernel finish the removal. Listeners on the device recover by themselves ({@link ListenerRecovery}).
 */
public final class VerbsFabric implements Fabric {

    private static final Logger LOG = LoggerFactory.getLogger(VerbsFabric.class);
    /**
     * A handler failing on an rdma_cm event: every event is a peer's doing (a request, an RTU, a DREQ, a reject), so
     * a handler that fails on some peer's event fails as often as that peer sends it (issue 37, hole 7). The other
     * lines of this class a peer cannot make repeat: device and port events, the device rescan and close are the
     * host's; a completion or shared receive queue in error is failed (and logged) once, and our queues are sized so
     * that no peer can overrun them; WQ_FATAL and PATH_MIG_ERR concern work queues and alternate paths that we never
     * create; the event channel failing ends this thread.
     */
    private static final LogLimiter EVENT_FAILED = LogLimiter.site(LOG, Level.ERROR,
            "rdma_cm events whose handling failed");
    /**
     * The connection-manager thread's longest wait: it is woken at once for events and for close, so this bound only
     * keeps a missed wake-up from holding a close for longer.
     */
    private static final LogLimiter FLOODED = LogLimiter.site(LOG, Level.WARN,
            "connection requests refused unread: their host had too many waiting");
    private static final int CM_WAIT_MILLIS = 10_000;
    /** Connection requests one host may have waiting to be handled; beyond, refused unread (a flood). */
    static final int REQUESTS_PER_HOST = 256;
    /** Connection requests all hosts together may have waiting. */
    static final int REQUESTS_WAITING = 8192;
    /** Events read before the waiting requests get a round: a bound on how long a round waits for a busy channel. */
    private static final int READ_PER_ROUND = 1024;
    /** The device rescan's period while nothing is under way (see the class comment). */
    private static final int IDLE_RESCAN_MILLIS = 5_000;
    /** The device rescan's period while a removal, a lost device or a deferred destroy is under way. */
    private static final int BUSY_RESCAN_MILLIS = 1_000;
    /** Back-off after poll(2) on the device event fds failed. */
    private static final int RETRY_MILLIS = 100;

    private final RdmaDevices devices;
    private final Map<RdmaDevice, VerbsDevice> deviceByContext = new ConcurrentHashMap<>(); // identity keys
    private final RdmaEventChannel eventChannel;
    private final Map<Long, Consumer<CmEvent>> routes = new ConcurrentHashMap<>();
    private final List<AutoCloseable> owned = new ArrayList<>();
    private final Thread cmThread;
    private final Thread asyncThread;
    private final AsyncEventReader asyncEvents;
    private final DeviceEventRouter router = new DeviceEventRouter();
    /** Lost devices, with the device listeners that still hold something on each. */
    private final Map<VerbsDevice, Set<DeviceListener>> lostDevices = new ConcurrentHashMap<>();
    private final Set<DeviceListener> deviceListeners = ConcurrentHashMap.newKeySet();
    /** rdma_cm ids whose destruction waits for their port to come back (see {@link #destroyWhenPortUp}). */
    private final List<DeferredDestroy> deferred = new ArrayList<>();
    /** Where rdma_destroy_id runs, so that no loop or closer waits for the kernel's CM (see its comment). */
    private final CmIdDestroyer idDestroyer = new CmIdDestroyer();
    /** How long {@link #close} lets the destroys handed over finish before it keeps the event channel instead. */
    private static final long ID_DRAIN_MILLIS = 5_000;

    private record DeferredDestroy(VerbsDevice device, int port, Runnable destroy, InetAddress source) {
    }
    private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "rdma-fabric-timer");
        t.setDaemon(true);
        return t;
    });
    private volatile boolean closed;
    /** Set once the last id is destroyed after close: the event threads end. */
    private volatile boolean threadsStop;

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
        try {
            asyncEvents = new AsyncEventReader();
        } catch (VerbsException e) {
            eventChannel.close();
            devices.close();
            throw new FabricException("cannot create the device event reader: " + e.getMessage(), e);
        }
        for (RdmaDevice device : devices.all()) {
            deviceByContext.put(device, new VerbsDevice(device));
            watch(device);
        }
        router.onPortUp(e -> retryLostListeners());
        cmThread = new Thread(this::dispatchEvents, "rdma-cm-events");
        cmThread.setDaemon(true);
        cmThread.start();
        asyncThread = new Thread(this::dispatchAsyncEvents, "rdma-async-events");
        asyncThread.setDaemon(true);
        asyncThread.start();
    }

    private void watch(RdmaDevice device) {
        try {
            asyncEvents.watch(device);
        } catch (VerbsException e) {
            LOG.warn("cannot read the async events of {} (port and device errors there will not fail connections "
                    + "at once): {}", device.name(), e.getMessage());
        }
    }

    ScheduledExecutorService timer() {
        return timer;
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

    /**
     * The local ACK timeout exponent ({@link Addressing#ackTimeout()}) and the retry count a connected queue pair of
     * this fabric runs with, as the device reports them (ibv_query_qp): {timeout, retryCount}. Their product is the
     * connection's retry budget; for operators and tests that want the device's word for it.
     */
    public int[] retryParameters(QueuePair queuePair) throws FabricException {
        if (!(queuePair instanceof VerbsQueuePair qp)) {
            throw new IllegalArgumentException("not a queue pair of the verbs fabric: " + queuePair);
        }
        return qp.retryParameters();
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
            VerbsDevice found = find(id);
            if (found == null) {
                refreshDevices(); // a device added since the last rescan (a re-added device, say)
                found = find(id);
            }
            if (found == null) {
                id.device(devices); // throws, naming the id
            }
            return found;
        } catch (VerbsException e) {
            throw new FabricException(e.getMessage(), e);
        }
    }

    private VerbsDevice find(RdmaCmId id) {
        try {
            return deviceByContext.get(id.device(devices));
        } catch (VerbsException e) {
            return null;
        }
    }

    /**
     * Whether {@code port} of {@code device} is down now. While it is, nothing may send a CM message through it: rxe
     * fails the send, which leaves the device's MAD queue pair without receives, and rdma_cm on that device never
     * answers again until it is re-created.
     */
    boolean isPortDown(VerbsDevice device, int port) {
        return port > 0 && !lostDevices.containsKey(device) && !device.rdmaDevice().isPortActive(port);
    }

    /**
     * Runs {@code destroy} (rdma_destroy_qp and rdma_destroy_id, which sends a DREQ) once the port is active again,
     * the device is lost or the fabric closes; at once when the port is up. The queue pair is in the error state
     * with nothing posted, so nothing reads or writes memory meanwhile.
     */
    void destroyWhenPortUp(VerbsDevice device, int port, Runnable destroy, InetAddress source) {
        synchronized (deferred) {
            deferred.add(new DeferredDestroy(device, port, destroy, source));
        }
        runDeferred(false); // the port may have come back meanwhile
        rescanSoon(); // while it waits, the device is looked at every second (it may go instead of coming back)
    }

    /** Destroys what waited for a port that is active again (or for a device that is gone: {@code all}). */
    private void runDeferred(boolean all) {
        List<DeferredDestroy> due = new ArrayList<>();
        synchronized (deferred) {
            for (DeferredDestroy d : deferred) {
                if (all || lostDevices.containsKey(d.device) || d.device.rdmaDevice().isPortActive(d.port)) {
                    due.add(d);
                }
            }
            deferred.removeAll(due);
        }
        for (DeferredDestroy d : due) {
            idDestroyer.destroy(d.destroy, "a connection of " + d.device.name() + " port " + d.port, d.source);
        }
    }

    /**
     * Destroys an rdma_cm id whose queue pair is already destroyed ({@code destroyId}: rdma_destroy_id), off the
     * calling thread: the kernel may hold rdma_destroy_id for as long as a DREQ goes unanswered. {@code what} names
     * the connection in the log.
     */
    void destroyIdLater(Runnable destroyId, String what, InetAddress source) {
        idDestroyer.destroy(destroyId, what, source);
    }

    /**
     * Tracks a queue pair for device events while it lives; {@code retryBudget} is how long it may ride out its port
     * being down (see {@link DeviceEventRouter}).
     */
    void track(VerbsQueuePair qp, int port, Duration retryBudget) {
        router.register(qp, qp.device().name(), port, retryBudget, qp::notifyDeviceEvent);
    }

    void untrack(VerbsQueuePair qp) {
        router.unregister(qp);
    }

    @Override
    public void addDeviceListener(DeviceListener listener) {
        deviceListeners.add(listener);
    }

    @Override
    public void removeDeviceListener(DeviceListener listener) {
        deviceListeners.remove(listener);
        for (VerbsDevice device : lostDevices.keySet()) {
            releaseDevice(device, listener);
        }
    }

    @Override
    public void onSrqLimit(Consumer<DeviceEvent> hook) {
        router.onSrqLimit(hook);
    }

    /** A device went away: its connections fail now; the device is freed once its owner released what it made. */
    void deviceGone(String deviceName, String reason) {
        for (VerbsDevice device : deviceByContext.values()) {
            if (device.name().equals(deviceName)) {
                deviceGone(device, reason);
            }
        }
    }

    private void deviceGone(VerbsDevice device, String reason) {
        Set<DeviceListener> holders = ConcurrentHashMap.newKeySet();
        holders.addAll(deviceListeners);
        if (lostDevices.putIfAbsent(device, holders) != null) {
            return;
        }
        LOG.error("{}: failing its connections and releasing what is on it", reason);
        rescanSoon();
        router.failDevice(device.name(), reason);
        runDeferred(false); // ids waiting for a port of this device: rdma_cm wants them destroyed now
        if (holders.isEmpty()) {
            free(device);
            return;
        }
        for (DeviceListener listener : List.copyOf(holders)) {
            listener.deviceLost(device, reason);
        }
    }

    @Override
    public void releaseDevice(FabricDevice fabricDevice, DeviceListener listener) {
        if (!(fabricDevice instanceof VerbsDevice device)) {
            return;
        }
        Set<DeviceListener> holders = lostDevices.get(device);
        if (holders != null && holders.remove(listener) && holders.isEmpty()) {
            free(device);
        }
    }

    private void free(VerbsDevice device) {
        synchronized (devices) {
            RdmaDevice rdma = device.rdmaDevice();
            if (rdma.isClosed()) {
                return;
            }
            asyncEvents.unwatch(rdma);
            String kept = device.releaseLeftovers();
            if (kept != null) {
                LOG.error("RDMA device {}: {} still in use by a running thread; kept, so the kernel cannot finish "
                        + "removing the device until the process exits", device.name(), kept);
            }
            devices.release(rdma);
            deviceByContext.remove(rdma);
        }
        lostDevices.remove(device);
        rescanSoon(); // the removal now waits for librdmacm to let go of the context, at the next rescan
        LOG.info("RDMA device {} released; librdmacm closes it at the next rescan", device.name());
    }

    /** Rescans the devices: new ones become usable, vanished ones are failed and released. */
    private void refreshDevices() throws VerbsException {
        RdmaDevices.Changes changes;
        synchronized (devices) {
            changes = devices.refresh();
            for (RdmaDevice added : changes.added()) {
                deviceByContext.put(added, new VerbsDevice(added));
                watch(added);
                LOG.info("RDMA device {} appeared", added.name());
            }
        }
        for (RdmaDevice vanished : changes.vanished()) {
            VerbsDevice device = deviceByContext.get(vanished);
            if (device != null) {
                deviceGone(device, "RDMA device " + vanished.name() + " was removed (no longer listed by the kernel)");
            }
        }
        if (!changes.added().isEmpty()) {
            retryLostListeners();
        }
    }

    private void retryLostListeners() {
        List<AutoCloseable> snapshot;
        synchronized (this) {
            snapshot = new ArrayList<>(owned);
        }
        for (AutoCloseable resource : snapshot) {
            if (resource instanceof VerbsListener listener) {
                listener.retryIfLost();
            }
        }
    }

    /**
     * Reads async events of every device and rescans the devices, until the fabric closes: every
     * {@link #IDLE_RESCAN_MILLIS} while nothing is under way, every {@link #BUSY_RESCAN_MILLIS} while something is.
     * A rescan a second cost this thread about 0.65 % of a core under the lab's emulation (the wake-up, the poll and
     * the rescan, in code the JIT never compiles at that rate).
     */
    private void dispatchAsyncEvents() {
        long nextScan = System.nanoTime();
        while (!threadsStop) {
            long untilScan = Math.max(0, TimeUnit.NANOSECONDS.toMillis(nextScan - System.nanoTime()));
            // each part on its own (AsyncEventRound): a device whose read fails, an event whose handling fails or a
            // failed rescan costs only itself; the others' events, the rescan and the deferred destroys go on
            boolean polled = AsyncEventRound.readAndDispatch(asyncEvents::poll,
                    (int) Math.min(IDLE_RESCAN_MILLIS, untilScan), this::onAsyncEvent);
            long now = System.nanoTime();
            if (threadsStop) {
                break;
            }
            if (now - nextScan >= 0) {
                AsyncEventRound.contained("rescanning the RDMA devices", this::refreshDevices);
                AsyncEventRound.contained("destroying what waited for a port", () -> runDeferred(false));
                nextScan = now + TimeUnit.MILLISECONDS.toNanos(underWay() ? BUSY_RESCAN_MILLIS : IDLE_RESCAN_MILLIS);
            } else if (nextScan - now > TimeUnit.MILLISECONDS.toNanos(BUSY_RESCAN_MILLIS) && underWay()) {
                nextScan = now + TimeUnit.MILLISECONDS.toNanos(BUSY_RESCAN_MILLIS); // woken: one started
            }
            if (!polled) {
                sleepQuietly(RETRY_MILLIS); // poll(2) itself failed: it would fail again at once
            }
        }
    }

    /** A removal, a lost device or a deferred destroy waits for a rescan: rescan every second. */
    private boolean underWay() {
        if (devices.removalPending() || !lostDevices.isEmpty()) {
            return true;
        }
        synchronized (deferred) {
            return !deferred.isEmpty();
        }
    }

    /** Something is under way now ({@link #underWay}): the async-event thread shortens its wait. */
    private void rescanSoon() {
        asyncEvents.wakeUp();
    }

    private static void sleepQuietly(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void onAsyncEvent(IbvAsyncEvent event) {
        String device = event.device().name();
        String name = event.type().cName();
        switch (event.type()) {
            case CQ_ERR -> {
                failCompletionQueue(event);
                return;
            }
            case SRQ_ERR -> {
                failSharedReceiveQueue(event);
                return;
            }
            case WQ_FATAL, PATH_MIG_ERR -> LOG.error("{}: the device reports a failed queue; the connections "
                    + "on it fail as their queue pairs report errors", event);
            default -> {
            }
        }
        DeviceEvent mapped = switch (event.type()) {
            case PORT_ERR -> DeviceEvent.port(DeviceEvent.Kind.PORT_DOWN, name, device, event.portNumber());
            case PORT_ACTIVE -> DeviceEvent.port(DeviceEvent.Kind.PORT_UP, name, device, event.portNumber());
            case DEVICE_FATAL -> new DeviceEvent(DeviceEvent.Kind.DEVICE_FATAL, name, device, 0, -1);
            case QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR -> DeviceEvent.queuePair(name, device, event.qpNumber());
            case SRQ_LIMIT_REACHED -> new DeviceEvent(DeviceEvent.Kind.SRQ_LIMIT, name, device, 0, -1);
            default -> new DeviceEvent(DeviceEvent.Kind.OTHER, event.toString(), device, event.portNumber(),
                    event.qpNumber());
        };
        router.dispatch(mapped);
        if (mapped.kind() == DeviceEvent.Kind.PORT_UP) {
            runDeferred(false);
        }
    }

    /**
     * IBV_EVENT_CQ_ERR: a completion queue overran (rxe drops the completion it could not hold) or failed. Its loop
     * cannot know which work finished, so the queue is failed, which takes the loop out of service and fails its
     * connections at once with this reason, instead of leaving them to wait for completions that never come. Our
     * queues are sized so that they cannot overrun: this is a bug or a device fault, hence an error. (The event is
     * acknowledged before this runs; a queue destroyed and another created at the same address in between would be
     * failed instead: queues are destroyed only when a loop stops, so that is not a practical case.)
     */
    private void failCompletionQueue(IbvAsyncEvent event) {
        VerbsDevice device = deviceByContext.get(event.device());
        String reason = event + ": the completion queue overran or failed, so completions of its connections are lost";
        VerbsDevice.Cq queue = device == null ? null : device.completionQueueAt(event.cq());
        if (queue == null) {
            LOG.error("{} (not a queue of ours)", reason);
        } else if (queue.fail(reason)) {
            LOG.error("{}; its completion loop and that loop's connections fail now", reason);
        } // else failed and logged already: rxe reports each completion it drops
    }

    private void failSharedReceiveQueue(IbvAsyncEvent event) {
        VerbsDevice device = deviceByContext.get(event.device());
        String reason = event + ": the shared receive queue failed, so its connections' SENDs may find no receive";
        VerbsDevice.Srq queue = device == null ? null : device.sharedReceiveQueueAt(event.srq());
        if (queue == null) {
            LOG.error("{} (not a queue of ours)", reason);
        } else if (queue.fail(reason)) {
            LOG.error("{}; the completion loop it belongs to and that loop's connections fail now", reason);
        }
    }

    /** A listener's route: its events, and a count of its requests refused unread ({@link #queueRequest}). */
    interface ListenerRoute extends Consumer<CmEvent> {
        void refusedUnread();
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

    /**
     * rdma_cm's event thread. Every event ready is read before any is handled: connection events at once, in the
     * order they came; connection requests into {@link FairRequestQueue}s by source host, then handled one per host
     * per round, reading again between rounds. So a host flooding the listener neither fills the kernel's listen
     * backlog (which drops first copies, and the dropped peer waits for rdma_cm's retry) nor queues ahead of
     * another host's request by more than one of its own.
     */
    private void dispatchEvents() {
        FairRequestQueue<InetAddress, CmEvent> requests = new FairRequestQueue<>(REQUESTS_PER_HOST, REQUESTS_WAITING);
        try {
            while (!threadsStop) {
                CmEvent event;
                int read = 0;
                try {
                    event = eventChannel.poll(requests.isEmpty() ? CM_WAIT_MILLIS : 0);
                    while (event != null) {
                        if (event.type() == CmEventType.CONNECT_REQUEST) {
                            queueRequest(requests, event);
                        } else {
                            dispatch(event);
                        }
                        event = ++read < READ_PER_ROUND ? eventChannel.poll(0) : null;
                    }
                } catch (VerbsException e) {
                    if (!threadsStop) {
                        LOG.error("rdma_cm event channel failed; no more connection events will be handled: {}",
                                e.getMessage());
                    }
                    return;
                }
                for (CmEvent request : requests.round()) {
                    dispatch(request);
                }
            }
        } finally {
            for (CmEvent request : requests.drain()) {
                refuseUnread(request);
            }
        }
    }

    private void queueRequest(FairRequestQueue<InetAddress, CmEvent> requests, CmEvent request) {
        InetSocketAddress peer = RdmaCmId.peerAddressOf(request.id());
        InetAddress host = peer == null ? null : SourceAddresses.host(peer.getAddress());
        if (!requests.offer(host, request)) {
            if (FLOODED.admit()) {
                LOG.warn("connection request from {} refused unread: {} requests of its host and {} in all wait "
                        + "already (at most {} per host, {} in all)",
                        peer == null ? "an unknown peer" : Endpoints.describe(peer), requests.waiting(host),
                        requests.size(), REQUESTS_PER_HOST, REQUESTS_WAITING);
            }
            if (routes.get(request.listenId()) instanceof ListenerRoute listener) {
                listener.refusedUnread(); // counted as the listener's refusals: it never sees these
            }
            refuseUnread(request);
        }
    }

    /** Rejects a request without reading it and destroys its id (the event is already acknowledged). */
    private static void refuseUnread(CmEvent request) {
        RdmaCmId orphan = RdmaCmId.adopt(request.id());
        try {
            orphan.reject(new byte[0]);
        } catch (VerbsException | RuntimeException ignored) {
            // the id is destroyed right after
        }
        orphan.close();
    }

    private void dispatch(CmEvent event) {
        long target = event.type() == CmEventType.CONNECT_REQUEST ? event.listenId() : event.id();
        Consumer<CmEvent> handler = routes.get(target);
        if (handler == null) {
            if (event.type() == CmEventType.CONNECT_REQUEST) {
                refuseUnread(event); // a request for a listener that is closing
            } else {
                LOG.debug("rdma_cm event {} for an id that is already gone", event);
            }
            return;
        }
        try {
            handler.accept(event);
        } catch (RuntimeException e) {
            if (EVENT_FAILED.admit()) {
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

    /**
     * Closes listeners and connections still open, lets the rdma_cm ids they handed over be destroyed, then stops
     * the event threads and releases the devices. When the kernel still holds an id after
     * {@value #ID_DRAIN_MILLIS} ms (a DREQ nobody answers is retried for about a minute), this returns and the
     * release finishes on the destroyer's thread once the kernel lets go: the event channel and its thread must
     * outlive every id (rdma_destroy_id writes to the channel and waits for the id's events to be acknowledged).
     */
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
        runDeferred(true);
        for (int i = toClose.size() - 1; i >= 0; i--) {
            try {
                toClose.get(i).close();
            } catch (Exception e) {
                LOG.warn("closing {} failed: {}", toClose.get(i), e.getMessage());
            }
        }
        closed = true; // no new listener or connection from here
        router.close(); // its port-down checks have nothing left to fail
        if (!idDestroyer.drain(ID_DRAIN_MILLIS)) {
            LOG.info("{} rdma_cm ids are still being destroyed {} ms after the fabric began to close (the kernel "
                    + "waits for their CM messages); the event threads and the devices are released once it lets "
                    + "go", idDestroyer.pending(), ID_DRAIN_MILLIS);
            idDestroyer.whenIdle(this::stopThreadsAndReleaseDevices);
            return;
        }
        stopThreadsAndReleaseDevices();
    }

    /** The end of {@link #close}: once no id is left to destroy. */
    private void stopThreadsAndReleaseDevices() {
        threadsStop = true;
        timer.shutdownNow();
        eventChannel.wakeUp();
        asyncEvents.wakeUp();
        try {
            cmThread.join(2000);
            asyncThread.join(2000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (cmThread.isAlive() || asyncThread.isAlive()) {
            // a thread still in rdma_get_cm_event or the async read would read freed memory: keep what it uses
            LOG.warn("the RDMA event threads did not stop within 2 s; their event channels and the devices are kept "
                    + "until the process exits");
            return;
        }
        asyncEvents.close();
        eventChannel.close();
        boolean kept = false;
        for (VerbsDevice device : deviceByContext.values()) {
            String live = device.liveChildren();
            if (live == null) {
                continue;
            }
            LOG.warn("RDMA device {} still has {} at fabric close (close every transport first)", device.name(), live);
            String left = device.releaseLeftovers();
            if (left != null) {
                kept = true;
                LOG.warn("RDMA device {}: {} still in use by a running thread; they and the device are kept until the "
                        + "process exits", device.name(), left);
            }
        }
        if (!kept) {
            devices.close();
        }
    }
}
