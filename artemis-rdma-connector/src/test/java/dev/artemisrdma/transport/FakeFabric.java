package dev.artemisrdma.transport;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import dev.artemisrdma.transport.FakeCq.Cqe;
import dev.artemisrdma.transport.FakeQp.QpState;
import dev.artemisrdma.transport.fabric.Addressing;
import dev.artemisrdma.transport.fabric.AddressingException;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.ConnectOptions;
import dev.artemisrdma.transport.fabric.ConnectionRejectedException;
import dev.artemisrdma.transport.fabric.ConnectionRequestHandler;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.DeviceEvent;
import dev.artemisrdma.transport.fabric.DeviceEventRouter;
import dev.artemisrdma.transport.fabric.DeviceListener;
import dev.artemisrdma.transport.fabric.DeviceTransport;
import dev.artemisrdma.transport.fabric.Fabric;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.FabricListener;
import dev.artemisrdma.transport.fabric.PartialPostException;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairCaps;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.fabric.QueuePairRefusedException;
import dev.artemisrdma.transport.fabric.QueuePairSpec;
import dev.artemisrdma.transport.fabric.SharedReceiveQueue;
import dev.artemisrdma.transport.fabric.WcStatus;
import dev.artemisrdma.transport.inmemory.Execution;
import dev.artemisrdma.transport.inmemory.KeptSend;
import dev.artemisrdma.transport.inmemory.Recv;
import dev.artemisrdma.transport.inmemory.Registry;
import dev.artemisrdma.transport.inmemory.VerbsRules;

/**
 * An in-memory {@link Fabric} that enforces the rules of real verbs and rdma_cm, so the transport protocol can be
 * tested without RDMA hardware. Public so other test packages (the Artemis adapters) can use it.
 *
 * <p>What it models:
 * <ul>
 *   <li>Registered memory: each registration is a direct ByteBuffer at a synthetic address with its own lkey. A
 *       scatter-gather entry outside a live registration (wrong lkey, or range) completes with LOC_PROT_ERR.
 *       Send data is read when the SEND executes (later, on the wire thread), not when it is posted, exactly as a
 *       NIC reads it by DMA; inline sends are copied at post time.</li>
 *   <li>A SEND with no receive posted on the peer: with the receiver's {@code rnrRetryCount} 0 the SEND completes
 *       with RNR_RETRY_EXC_ERR and both queue pairs go to error; with 7 it waits for a receive; 1..6 wait
 *       {@code 20 ms * count} and then fail.</li>
 *   <li>A SEND longer than the posted receive: the receive completes with LOC_LEN_ERR and the SEND with
 *       REM_INV_REQ_ERR (as InfiniBand reports it), both queue pairs to error.</li>
 *   <li>Posting: more scatter-gather entries than caps, or an inline send above max inline data, fails with EINVAL;
 *       more outstanding work requests than caps with ENOMEM (send queue slots of unsignaled sends are only
 *       reclaimed when a later completion of that queue pair is polled, as on real providers); a send before the
 *       connection is established fails. Concurrent posts on one queue pair, or concurrent polls of one
 *       completion queue, are violations.</li>
 *   <li>Completions: delivered by the wire thread, in order per queue pair; error completions are generated
 *       even for unsignaled sends; a completion queue that overflows is fatal (its poll throws). Notification:
 *       only completions arriving after {@code requestNotification} wake {@code awaitNotification}.</li>
 *   <li>Disconnect moves both queue pairs to error (every outstanding work request flushes with WR_FLUSH_ERR) and
 *       reports {@link QueuePairEvents#disconnected} on both sides, on the connection-manager thread.</li>
 *   <li>Shared receive queues: a SEND to a queue pair created on an SRQ consumes the SRQ's oldest receive (an empty
 *       SRQ is an RNR, as above); the receive completes on that queue pair's completion queue with its number; the
 *       SRQ's receives are never flushed by a queue pair's error; posting a receive on such a queue pair, destroying
 *       an SRQ some queue pair still uses, or deregistering memory an SRQ receive points into are violations. The
 *       limit event fires once when the posted count falls below the armed limit.</li>
 *   <li>Teardown rules: destroying an established queue pair with work requests still posted, deregistering
 *       memory a posted work request points into (or a receive landed in whose completion is not yet polled), or
 *       destroying a completion queue still in use, are violations.</li>
 *   <li>Native objects form a tree: device (protection domain) -> memory regions, completion queues, shared receive
 *       queues -> queue pairs. Destroying a parent with live children is refused as verbs refuses it (EBUSY), and
 *       recorded: a completion queue a queue pair uses is closed for its user but stays live, leaked (as our binding
 *       leaves it); a shared receive queue a queue pair uses stays alive and its close throws IllegalStateException
 *       (as {@code VerbsDevice.Srq.close}); a removed device released while anything lives on it is not freed (it
 *       stays out of {@link #releasedDevices}); closing the fabric while a device still holds objects is a
 *       violation.</li>
 * </ul>
 * Every rule broken is recorded in {@link #violations()}; live resources are counted so tests can prove that
 * everything was released.
 *
 * <p>This class is the fabric itself: connection management, the registries of live objects, the wire thread that
 * executes SENDs, the violation log and the test hooks. Each fake verbs object has its own file ({@link FakeDevice},
 * {@link FakeMr}, {@link FakeCq}, {@link FakeSrq}, {@link FakeQp}, {@link FakeListener}, {@link FakeRequest}) and
 * reaches the fabric through an explicit reference; all their mutable state is guarded by the fabric's one
 * {@link #lock}.
 *
 * <p>This is the strict mode of the in-memory fabric. The verbs rules themselves are written once in
 * {@code dev.artemisrdma.transport.inmemory}, shared with the fast mode the host benchmarks and the allocation tests
 * run on ({@code MemoryFabric}): registration and keys ({@code Registry}), caps, scatter-gather entries, inline bytes,
 * immediate data and queue depths ({@code VerbsRules}), what a SEND does to the peer's receive and the statuses of
 * its completions ({@code Execution}), posted receives ({@code RecvRing}) and posted SENDs ({@code KeptSend}). What this
 * mode adds is the bookkeeping around them: every rule broken recorded in {@link #violations()}, the wire thread
 * (a SEND executes later than its post, as on a NIC, so a buffer reused too early shows), the RNR retry counts, the
 * teardown and deregistration checks, and the fault injections.
 */
public final class FakeFabric implements Fabric {

    public static final int EINVAL = VerbsRules.EINVAL;
    public static final int ENOMEM = VerbsRules.ENOMEM;
    static final int MAX_ACCEPT_DATA = 196;
    static final int MAX_REJECT_DATA = 148;

    /**
     * Device limits; {@code roundUp} rounds queue depths up to a power of two, as rxe and mlx5 do. A queue pair asking
     * more inline bytes than {@code maxInlineData} is refused with EINVAL, as providers do; {@code reportsInline}
     * false hides the figure from {@link FabricDevice#limits()} (a device nobody probed), so only refusals tell it.
     * {@code maxSrq} 0: no shared receive queues. See {@link DeviceProfile} for real devices' limits.
     */
    public record Limits(int maxQpWr, int maxSge, int maxCqe, int maxInlineData, boolean roundUp, int maxSrq,
                         int maxSrqWr, DeviceTransport transport, boolean reportsInline) {

        public Limits(int maxQpWr, int maxSge, int maxCqe, int maxInlineData, boolean roundUp) {
            this(maxQpWr, maxSge, maxCqe, maxInlineData, roundUp, 1024, maxQpWr, DeviceTransport.INFINIBAND, true);
        }

        public static Limits defaults() {
            return new Limits(16384, 32, 1 << 20, 256, true);
        }

        /** These limits, the inline figure known only by refusals. */
        public Limits inlineUnreported() {
            return new Limits(maxQpWr, maxSge, maxCqe, maxInlineData, roundUp, maxSrq, maxSrqWr, transport, false);
        }
    }

    final Limits limits;
    final ReentrantLock lock = new ReentrantLock();
    final Condition wireWork = lock.newCondition();
    private final List<String> violations = new CopyOnWriteArrayList<>();
    final ExecutorService cm;
    private final Thread wire;
    volatile FakeDevice device = new FakeDevice(this, 0);
    /** Every device this fabric had (a removed one and its re-added successor are two). */
    private final List<FakeDevice> devices = new CopyOnWriteArrayList<>(List.of(device));
    /** Its port-down checks fail queue pairs on the cm thread, where every other connection event is delivered. */
    private final DeviceEventRouter router;
    private final Set<DeviceListener> deviceListeners = ConcurrentHashMap.newKeySet();
    private final List<FabricDevice> releasedDevices = new CopyOnWriteArrayList<>();
    private final Map<FabricDevice, Set<DeviceListener>> lostDevices = new ConcurrentHashMap<>();
    final java.util.concurrent.ScheduledExecutorService recoveryTimer =
            Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "fake-rdma-timer");
                t.setDaemon(true);
                return t;
            });
    private volatile boolean deviceRemoved;
    final Map<InetSocketAddress, FakeListener> listeners = new ConcurrentHashMap<>();
    final List<FakeQp> qps = new ArrayList<>();
    /** Registrations by lkey (the rule of keys and ranges is the core's). */
    final Registry<FakeMr> memory = new Registry<>();
    /** The receive the wire thread's SEND takes; the wire thread's, under the lock. */
    private final Recv taken = new Recv();
    private final AtomicInteger liveQps = new AtomicInteger();
    final AtomicInteger liveCqs = new AtomicInteger();
    final AtomicInteger liveMrs = new AtomicInteger();
    final AtomicInteger liveSrqs = new AtomicInteger();
    final AtomicInteger srqLimitEvents = new AtomicInteger();
    final Set<FakeSrq> srqs = ConcurrentHashMap.newKeySet();
    volatile int srqLowWater = Integer.MAX_VALUE;
    private final AtomicInteger nextPort = new AtomicInteger(40000);
    private final AtomicInteger injectedSendErrors = new AtomicInteger();
    private volatile int injectedStatus;
    final AtomicInteger partialSendPost = new AtomicInteger(-1);
    final AtomicInteger partialRecvPost = new AtomicInteger(-1);
    /** SENDs posted, by their number of scatter-gather entries (the last cell counts 3 and more). */
    final java.util.concurrent.atomic.AtomicLongArray sendsBySges =
            new java.util.concurrent.atomic.AtomicLongArray(4);
    final List<Deregistration> deregistrations = new CopyOnWriteArrayList<>();
    volatile boolean receivesPolledBeforeDestroy;
    volatile boolean stallHandshakes;
    private volatile InetAddress connectFrom = clientAddress();
    /** The longest a listener's handler held the connection-manager thread with one request (rdma_cm's thread). */
    public final java.util.concurrent.atomic.AtomicLong longestRequestNanos =
            new java.util.concurrent.atomic.AtomicLong();
    volatile boolean holdPassiveEstablished;
    final AtomicInteger establishedByPeer = new AtomicInteger();
    final List<Runnable> heldEstablished = new ArrayList<>();
    volatile boolean noImmediateData;
    /** Queue pair creates refused for asking more inline bytes than the device allows. */
    final AtomicInteger refusedInline = new AtomicInteger();
    private final List<Integer> grantedInline = new CopyOnWriteArrayList<>();
    volatile java.util.function.IntConsumer beforeAcceptPrepare = qpn -> { };
    private final Set<InetSocketAddress> frozen = ConcurrentHashMap.newKeySet();
    /** Queue pairs' local addresses whose completion queues seem empty to their poller ({@link #holdCompletions}). */
    private final Set<InetSocketAddress> heldCompletions = ConcurrentHashMap.newKeySet();
    private int nextQpn = 0x101;
    private int wireCursor;
    private volatile boolean closed;

    public FakeFabric() {
        this(Limits.defaults());
    }

    public FakeFabric(Limits limits) {
        this.limits = limits;
        this.cm = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "fake-rdma-cm");
            t.setDaemon(true);
            return t;
        });
        this.router = new DeviceEventRouter(cm);
        this.wire = new Thread(this::runWire, "fake-rdma-wire");
        wire.setDaemon(true);
        wire.start();
    }

    // ------------------------------------------------------------------------------------------ test helpers

    public List<String> violations() {
        return List.copyOf(violations);
    }

    public void clearViolations() {
        violations.clear();
    }

    /** SENDs posted so far (credit frames included) with {@code sges} scatter-gather entries (3: 3 and more). */
    public long postedSends(int sges) {
        return sendsBySges.get(Math.min(sges, sendsBySges.length() - 1));
    }

    public void assertNoViolations() {
        if (!violations.isEmpty()) {
            throw new AssertionError("fabric rules broken: " + violations);
        }
    }

    public int liveQueuePairs() {
        return liveQps.get();
    }

    public int liveCompletionQueues() {
        return liveCqs.get();
    }

    public int liveMemoryRegions() {
        return liveMrs.get();
    }

    public int liveSharedReceiveQueues() {
        return liveSrqs.get();
    }

    /**
     * Raises IBV_EVENT_SRQ_ERR on every live shared receive queue, as a device whose queue failed would: each tells
     * its listener ({@link SharedReceiveQueue#onFailure}) once. Returns how many were failed.
     */
    public int failSharedReceiveQueues(String reason) {
        int n = 0;
        for (FakeSrq s : srqs) {
            if (s.fail(reason)) {
                n++;
            }
        }
        return n;
    }

    /** ibv_post_srq_recv calls so far, over the live shared receive queues. */
    public long sharedReceivePostCalls() {
        long calls = 0;
        for (FakeSrq q : srqs) {
            calls += q.postCalls.get();
        }
        return calls;
    }

    /** Receives posted now on the live shared receive queues. */
    public int sharedReceivesPosted() {
        lock.lock();
        try {
            int posted = 0;
            for (FakeSrq q : srqs) {
                posted += q.closed ? 0 : q.rq.size();
            }
            return posted;
        } finally {
            lock.unlock();
        }
    }

    /** SRQ limit events raised (each arming fires at most once). */
    public int srqLimitEvents() {
        return srqLimitEvents.get();
    }

    /** The fewest receives any SRQ had posted right after a SEND consumed one (MAX_VALUE before any). */
    public int srqLowWater() {
        return srqLowWater;
    }

    public FabricDevice device() {
        return device;
    }

    /** The next {@code count} SENDs executed complete with {@code status} (fault injection, not a violation). */
    public void injectSendErrors(int status, int count) {
        injectedStatus = status;
        injectedSendErrors.set(count);
    }

    /**
     * The next postSend of more than {@code posted} work requests posts the first {@code posted} and then fails
     * with {@link PartialPostException}, as ibv_post_send does when a later request is bad (fault injection).
     */
    public void injectPartialSendPost(int posted) {
        partialSendPost.set(posted);
    }

    /** As {@link #injectPartialSendPost}, for the next postRecv of more than {@code posted} receives. */
    public void injectPartialRecvPost(int posted) {
        partialRecvPost.set(posted);
    }

    /**
     * From now on, destroying a queue pair whose receive completions (flushes included) are still waiting in its
     * completion queue is a violation: teardown must have waited for every receive it posted.
     */
    public void requireReceivesPolledBeforeDestroy() {
        receivesPolledBeforeDestroy = true;
    }

    /** A memory registration that was released: its size and the thread that released it. */
    public record Deregistration(int bytes, String thread) {
    }

    /** Every registration released so far, in order. */
    public List<Deregistration> deregistrations() {
        return List.copyOf(deregistrations);
    }

    /** How many of {@code size} requests to post before an injected partial failure; -1: none injected. */
    static int takeInjected(AtomicInteger injection, int size) {
        int k = injection.get();
        return k >= 0 && size > k && injection.compareAndSet(k, -1) ? k : -1;
    }

    /**
     * The next poll of the completion queue that queue pair {@code qpNumber} uses throws {@code failure} (a
     * FabricException as from a failing ibv_poll_cq, or any RuntimeException or Error): fault injection for the
     * thread that polls it.
     */
    public void failNextPoll(int qpNumber, Throwable failure) {
        if (!(failure instanceof FabricException || failure instanceof RuntimeException || failure instanceof Error)) {
            throw new IllegalArgumentException("poll can throw FabricException, RuntimeException or Error: " + failure);
        }
        lock.lock();
        try {
            for (FakeQp qp : qps) {
                if (qp.qpn == qpNumber) {
                    qp.cq.pollFailure = failure;
                    qp.cq.signal.signalAll();
                    return;
                }
            }
        } finally {
            lock.unlock();
        }
        throw new IllegalArgumentException("no queue pair " + qpNumber);
    }

    /** The inline bytes of every queue pair created so far, in order, as the device granted them. */
    public List<Integer> grantedInline() {
        return List.copyOf(grantedInline);
    }

    /** Queue pair creates this fabric refused so far for asking more inline bytes than its device allows. */
    public int refusedInlineCreates() {
        return refusedInline.get();
    }

    /**
     * The fabric's devices are iWARP-like (siw): SEND_WITH_IMM is an invalid opcode, a violation that fails the post.
     */
    public void withoutImmediateData() {
        noImmediateData = true;
    }

    /**
     * While on, connecting peers never complete the handshake (no RTU, as a hostile or vanished peer): accepts
     * create and prepare the passive queue pair and return, but it is never established and the connecting side
     * waits until its timeout.
     */
    public void stallHandshakes(boolean on) {
        stallHandshakes = on;
    }

    /**
     * Holds the connection-manager thread until the returned latch is counted down (or 10 s passed): rdma_cm's
     * events (DISCONNECTED among them) wait, as behind a busy event channel, while queue pairs that went to error
     * already flush their work requests. Returns once the thread is held.
     */
    public java.util.concurrent.CountDownLatch holdEvents() throws InterruptedException {
        java.util.concurrent.CountDownLatch held = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        cm.execute(() -> {
            held.countDown();
            try {
                release.await(10, java.util.concurrent.TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        held.await();
        return release;
    }

    /** The source address of the connections made from now on (10.77.0.2 unless a test says otherwise). */
    public void connectFrom(InetAddress source) {
        connectFrom = source;
    }

    /**
     * While on, the rdma_cm id of a queue pair closed meanwhile stays in the "kernel" until
     * {@link #releaseIdDestroys}, as rdma_destroy_id waits about a minute for a DREQ the peer never answers.
     */
    public void holdIdDestroys(boolean on) {
        holdIdDestroys = on;
    }

    /** The held ids are destroyed: whoever waited for them ({@code QueuePair.whenGone}) hears of it. */
    public void releaseIdDestroys() {
        List<Runnable> gone;
        lock.lock();
        try {
            gone = new ArrayList<>(heldIdDestroys);
            heldIdDestroys.clear();
            held.clear();
        } finally {
            lock.unlock();
        }
        gone.forEach(Runnable::run);
    }

    /** Ids of closed queue pairs the fabric still holds (see {@link #holdIdDestroys}). */
    public int idsHeld() {
        lock.lock();
        try {
            return held.size();
        } finally {
            lock.unlock();
        }
    }

    volatile boolean holdIdDestroys;
    /** Closed queue pairs whose id is held, and what waits for each; guarded by {@link #lock}. */
    final Set<FakeQp> held = new java.util.HashSet<>();
    final List<Runnable> heldIdDestroys = new ArrayList<>();

    /**
     * While on, the passive side's ESTABLISHED events wait until {@link #deliverHeldEstablished}: the connecting
     * side's connect has returned and its queue pair (and the passive one, as rdma_accept leaves it) is ready to
     * send, but the passive side has not heard it yet, as when rdma_cm's RTU is slow or lost.
     */
    public void holdPassiveEstablished(boolean on) {
        holdPassiveEstablished = on;
    }

    /** How many accepted queue pairs were told that the peer's first frame established them. */
    public int establishedByPeer() {
        return establishedByPeer.get();
    }

    /** Delivers the ESTABLISHED events held since {@link #holdPassiveEstablished}; returns how many there were. */
    public int deliverHeldEstablished() {
        List<Runnable> held;
        synchronized (heldEstablished) {
            held = new ArrayList<>(heldEstablished);
            heldEstablished.clear();
        }
        held.forEach(cm::execute);
        return held.size();
    }

    /**
     * The peer at {@code address} (a queue pair's local address) hangs: SENDs to it wait on the wire and it
     * acknowledges nothing, until {@link #thaw}. A disconnect still reaches both sides, as rdma_cm's would.
     */
    public void freeze(InetSocketAddress address) {
        frozen.add(address);
    }

    public void thaw(InetSocketAddress address) {
        frozen.remove(address);
        lock.lock();
        try {
            wireWork.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /**
     * The completion queues of queue pairs at {@code address} (a queue pair's local address) seem empty to their
     * poller until {@link #releaseCompletions}, while the wire goes on filling them: what arrives meanwhile is
     * handled in one batch, in arrival order, as by a completion loop that fell behind.
     */
    public void holdCompletions(InetSocketAddress address) {
        heldCompletions.add(address);
    }

    /** Ends {@link #holdCompletions}: a poller waiting for a notification is woken if anything waits. */
    public void releaseCompletions(InetSocketAddress address) {
        lock.lock();
        try {
            heldCompletions.remove(address);
            for (FakeQp qp : qps) {
                if (qp.local.equals(address) && !qp.cq.entries.isEmpty()) {
                    qp.cq.notified = true;
                    qp.cq.signal.signalAll();
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /** Whether {@link #holdCompletions} hides {@code cq}'s entries (under the lock). */
    boolean completionsHeld(FakeCq cq) {
        if (heldCompletions.isEmpty()) {
            return false;
        }
        for (FakeQp qp : cq.users) {
            if (heldCompletions.contains(qp.local)) {
                return true;
            }
        }
        return false;
    }

    /** Successful receive completions waiting, unpolled, for queue pairs at {@code address} from {@code peer}. */
    public int receivesWaiting(InetSocketAddress address, InetSocketAddress peer) {
        lock.lock();
        try {
            int n = 0;
            for (FakeQp qp : qps) {
                if (qp.local.equals(address) && qp.remote.equals(peer)) {
                    for (FakeCq.Cqe e : qp.cq.entries) {
                        if (e.qp() == qp && e.recv() && e.status() == WcStatus.SUCCESS) {
                            n++;
                        }
                    }
                }
            }
            return n;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Runs {@code hook} with the queue pair number on the accepting side after its queue pair is created and before
     * the transport prepares it: the window in which a connection is half set up.
     */
    public void beforeAcceptPrepare(java.util.function.IntConsumer hook) {
        beforeAcceptPrepare = hook;
    }

    /** The link goes down: every connected queue pair goes to error and both sides hear of it. */
    public void breakAllConnections(String reason) {
        lock.lock();
        try {
            for (FakeQp qp : new ArrayList<>(qps)) {
                if (qp.state == QpState.RTS) {
                    toError(qp);
                    FakeQp q = qp;
                    cm.execute(() -> q.events.disconnected(q, reason));
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /** A verbs async event arrives (as ibv_get_async_event would deliver it), handled on the cm thread. */
    public void injectDeviceEvent(DeviceEvent event) {
        cm.execute(() -> router.dispatch(event));
    }

    /**
     * The device is removed (rdma link delete): every connection on it hears RDMA_CM_EVENT_DEVICE_REMOVAL, listeners
     * lose their binding (and recover once {@link #restoreDevice} brought it back), connects fail, and the device
     * listeners (transports) are told; the device is freed once they all released it ({@link #releasedDevices}).
     */
    public void removeDevice() {
        FakeDevice gone = device;
        deviceRemoved = true;
        String reason = "RDMA device " + gone.name() + " was removed (RDMA_CM_EVENT_DEVICE_REMOVAL)";
        cm.execute(() -> {
            for (FakeListener l : new ArrayList<>(listeners.values())) {
                l.lose(reason);
            }
            Set<DeviceListener> holders = ConcurrentHashMap.newKeySet();
            holders.addAll(deviceListeners);
            lostDevices.put(gone, holders);
            router.failDevice(gone.name(), reason);
            if (holders.isEmpty()) {
                freeDevice(gone);
            }
            for (DeviceListener listener : List.copyOf(holders)) {
                listener.deviceLost(gone, reason);
            }
        });
    }

    /** The device is back (rdma link add): a new device object with the same name, as a re-added rxe is. */
    public void restoreDevice() {
        device = new FakeDevice(this, device.generation + 1);
        devices.add(device);
        deviceRemoved = false;
    }

    final AtomicInteger listensBound = new AtomicInteger();

    /** An address change on a listener's address (RDMA_CM_EVENT_ADDR_CHANGE): it re-binds. */
    public void changeListenerAddress(InetSocketAddress address) {
        cm.execute(() -> {
            FakeListener l = listeners.get(address);
            if (l != null) {
                l.lose("its address moved (RDMA_CM_EVENT_ADDR_CHANGE)");
            }
        });
    }

    /** Devices freed after removal (every device listener released what it had there). */
    public List<FabricDevice> releasedDevices() {
        return List.copyOf(releasedDevices);
    }

    /** Whether a listener on {@code address} is bound (not lost). */
    public boolean isListening(InetSocketAddress address) {
        return listeners.containsKey(address);
    }

    /** Listeners bound so far: a rebind shows as a rise, where isListening may not have seen the gap. */
    public int listensBound() {
        return listensBound.get();
    }

    @Override
    public void addDeviceListener(DeviceListener listener) {
        deviceListeners.add(listener);
    }

    @Override
    public void removeDeviceListener(DeviceListener listener) {
        deviceListeners.remove(listener);
        for (FabricDevice d : lostDevices.keySet()) {
            releaseDevice(d, listener);
        }
    }

    @Override
    public void releaseDevice(FabricDevice d, DeviceListener listener) {
        Set<DeviceListener> holders = lostDevices.get(d);
        if (holders != null && holders.remove(listener) && holders.isEmpty()) {
            lostDevices.remove(d);
            freeDevice((FakeDevice) d);
        }
    }

    /**
     * Frees a lost device once every holder released it (ibv_dealloc_pd, then the context): refused, as verbs refuses
     * it with EBUSY, while anything still lives on it. A refused device stays, leaked, out of {@link #releasedDevices}.
     */
    private void freeDevice(FakeDevice d) {
        lock.lock();
        try {
            String live = d.liveChildren();
            if (!live.isEmpty()) {
                violation("device " + d + " freed while it still holds " + live + " (ibv_dealloc_pd: EBUSY)");
                return;
            }
            releasedDevices.add(d);
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void onSrqLimit(java.util.function.Consumer<DeviceEvent> hook) {
        router.onSrqLimit(hook);
    }

    void violation(String what) {
        violations.add(what);
    }

    // ---------------------------------------------------------------------------------------------- Fabric

    @Override
    public FabricListener listen(InetSocketAddress bindAddress, Addressing addressing,
                                 ConnectionRequestHandler handler) throws FabricException {
        if (closed) {
            throw new FabricException("fabric closed");
        }
        addressing.requireKnownDevice(List.of(device.name()));
        requireDevice(bindAddress);
        InetSocketAddress addr = bindAddress.getPort() == 0
                ? new InetSocketAddress(bindAddress.getAddress(), nextPort.incrementAndGet()) : bindAddress;
        FakeListener l = new FakeListener(this, addr, handler, addressing);
        if (listeners.putIfAbsent(addr, l) != null) {
            throw new FabricException("rdma_bind_addr " + addr + ": address in use (EADDRINUSE)");
        }
        listensBound.incrementAndGet();
        return l;
    }

    @Override
    public QueuePair connect(InetSocketAddress remote, ConnectionSetup setup, ConnectOptions options,
                             QueuePairEvents events) throws FabricException {
        if (closed) {
            throw new FabricException("fabric closed");
        }
        options.addressing().requireKnownDevice(List.of(device.name()));
        requireDevice(remote);
        FakeListener l = findListener(remote);
        if (l == null) {
            throw new FabricException("connect to " + remote + ": connection refused (no listener)");
        }
        InetSocketAddress local = new InetSocketAddress(connectFrom, nextPort.incrementAndGet());
        FakeQp qp = ConnectionSetup.createFitted(setup, device,
                spec -> createQp(spec, events, local, remote, options.addressing().retryBudget(options.retryCount())));
        qp.incomingRnrRetry = options.rnrRetryCount();
        // prepare hands the queue pair over (ConnectionSetup.prepare): from here on only the channel destroys it, on
        // every outcome; a queue pair it forgets stays live, and tests that count them see the leak
        setup.prepare(qp);
        FakeRequest req = new FakeRequest(this, l, qp, options.privateData().clone());
        cm.execute(() -> {
            long began = System.nanoTime();
            try {
                l.handler.onConnectionRequest(req);
            } catch (RuntimeException e) {
                req.rejectIfUndecided();
            }
            longestRequestNanos.accumulateAndGet(System.nanoTime() - began, Math::max);
            if (req.undecided()) {
                violation("connection request from " + local + " neither accepted nor rejected");
                req.rejectIfUndecided();
            }
        });
        Duration timeout = options.timeout();
        lock.lock();
        try {
            long left = timeout.toNanos();
            while (req.outcome == 0 && left > 0) {
                try {
                    left = req.decided.awaitNanos(left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
            if (req.outcome == 0) {
                req.outcome = -2; // gave up: a late accept fails
            }
        } finally {
            lock.unlock();
        }
        if (req.outcome == 1) {
            return qp;
        }
        if (req.outcome == -1) {
            throw new ConnectionRejectedException(remote, req.rejectData);
        }
        throw new FabricException("connect to " + remote + " timed out after " + timeout.toMillis() + " ms");
    }

    @Override
    public void close() {
        lock.lock();
        try {
            for (FakeDevice d : devices) {
                String live = d.liveChildren();
                if (!closed && !releasedDevices.contains(d) && !live.isEmpty()) {
                    violation("fabric closed while device " + d + " still holds " + live
                            + ": whoever made them must destroy them first");
                }
            }
        } finally {
            lock.unlock();
        }
        closed = true;
        router.close();
        recoveryTimer.shutdownNow();
        listeners.clear();
        cm.shutdownNow();
        lock.lock();
        try {
            wireWork.signalAll();
        } finally {
            lock.unlock();
        }
        try {
            wire.join(2000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    void requireDevice(InetSocketAddress address) throws FabricException {
        if (deviceRemoved) {
            throw new AddressingException("no RDMA device has the address " + address + " (ENODEV): the device "
                    + "was removed");
        }
    }

    private FakeListener findListener(InetSocketAddress remote) {
        FakeListener l = listeners.get(remote);
        if (l != null) {
            return l;
        }
        for (FakeListener c : listeners.values()) {
            if (c.address.getPort() == remote.getPort() && c.address.getAddress().isAnyLocalAddress()) {
                return c;
            }
        }
        return null;
    }

    private static InetAddress clientAddress() {
        try {
            return InetAddress.getByAddress(new byte[] {10, 77, 0, 2});
        } catch (UnknownHostException e) {
            throw new AssertionError(e);
        }
    }

    // ------------------------------------------------------------------------------------- resources

    /** A queue pair in INIT; {@code retryBudget} is how long it rides out its port being down (device events). */
    FakeQp createQp(QueuePairSpec spec, QueuePairEvents events, InetSocketAddress local,
                            InetSocketAddress remote, Duration retryBudget) throws FabricException {
        if (!(spec.completionQueue() instanceof FakeCq) || ((FakeCq) spec.completionQueue()).fabric() != this) {
            violation("queue pair spec names a completion queue of another fabric");
            throw new FabricException("create_qp: foreign completion queue (EINVAL)");
        }
        FakeCq cq = (FakeCq) spec.completionQueue();
        if (limits.transport() == DeviceTransport.NO_RELIABLE_CONNECTION) {
            violation("reliable-connected queue pair asked of a device without them");
            throw new FabricException("create_qp: no reliable-connected queue pairs on this device (EOPNOTSUPP)");
        }
        VerbsRules.DeviceCaps device = new VerbsRules.DeviceCaps(limits.maxQpWr(), limits.maxSge(),
                limits.maxInlineData(), limits.roundUp());
        if (VerbsRules.refusedForInline(spec, device)) {
            refusedInline.incrementAndGet();
        }
        QueuePairCaps caps = VerbsRules.grant(spec, device);
        FakeSrq srq = null;
        if (spec.sharedReceiveQueue() != null) {
            if (!(spec.sharedReceiveQueue() instanceof FakeSrq s) || !srqs.contains(s)) {
                violation("queue pair spec names a shared receive queue of another fabric");
                throw new FabricException("create_qp: foreign shared receive queue (EINVAL)");
            }
            srq = s;
        }
        lock.lock();
        try {
            if (cq.closed) {
                violation("queue pair created on a destroyed completion queue");
                throw new FabricException("create_qp: completion queue destroyed");
            }
            if (srq != null && srq.closed) {
                violation("queue pair created on a destroyed shared receive queue");
                throw new FabricException("create_qp: shared receive queue destroyed");
            }
            FakeQp qp = new FakeQp(this, nextQpn++, caps, cq, events, local, remote);
            grantedInline.add(caps.maxInlineData());
            qp.srq = srq;
            if (srq != null) {
                srq.users.add(qp);
            }
            qps.add(qp);
            qp.device.qps.add(qp);
            router.register(qp, qp.device.name(), 1, retryBudget, events);
            cq.users.add(qp);
            liveQps.incrementAndGet();
            return qp;
        } finally {
            lock.unlock();
        }
    }

    void destroyQuietly(FakeQp qp) {
        lock.lock();
        try {
            if (qp.state != QpState.DESTROYED) {
                qp.sq.clear();
                qp.rq.clear();
                destroyLocked(qp);
            }
        } finally {
            lock.unlock();
        }
    }

    void destroyLocked(FakeQp qp) {
        qp.state = QpState.DESTROYED;
        qp.sq.clear();
        qp.rq.clear();
        qps.remove(qp);
        qp.device.qps.remove(qp);
        router.unregister(qp);
        qp.cq.users.remove(qp);
        if (qp.srq != null) {
            qp.srq.users.remove(qp);
        }
        liveQps.decrementAndGet();
    }

    // ---------------------------------------------------------------------------------------- the wire

    private void runWire() {
        while (!closed) {
            lock.lock();
            try {
                FakeQp qp = nextReady();
                if (qp == null) {
                    wireWork.awaitNanos(TimeUnit.MILLISECONDS.toNanos(5));
                    continue;
                }
                execute(qp, qp.sq.poll());
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                violation("fake fabric internal error: " + e);
            } finally {
                lock.unlock();
            }
        }
    }

    /** Round robin over queue pairs whose next SEND can execute (or must fail) now. */
    private FakeQp nextReady() {
        int n = qps.size();
        long now = System.nanoTime();
        for (int i = 0; i < n; i++) {
            FakeQp qp = qps.get((wireCursor + i) % n);
            if (qp.state != QpState.RTS || qp.sq.isEmpty()) {
                continue;
            }
            FakeQp peer = qp.peer;
            if (peer != null && peer.state == QpState.RTS && frozen.contains(peer.local)) {
                continue; // a hung peer: the SEND waits on the wire
            }
            if (peer == null || peer.state != QpState.RTS || !peer.receiveQueue().isEmpty()
                    || peer.incomingRnrRetry == 0) {
                wireCursor = (wireCursor + i + 1) % Math.max(1, n);
                return qp;
            }
            KeptSend head = qp.sq.peek();
            if (head.rnrSince == 0) {
                head.rnrSince = now;
            }
            if (peer.incomingRnrRetry < 7 && now - head.rnrSince > TimeUnit.MILLISECONDS.toNanos(
                    20L * peer.incomingRnrRetry)) {
                wireCursor = (wireCursor + i + 1) % Math.max(1, n);
                return qp;
            }
        }
        return null;
    }

    /** Executes one SEND by the rules of {@link Execution}, recording each rule it breaks (wire thread, locked). */
    private void execute(FakeQp qp, KeptSend w) {
        FakeQp peer = qp.peer;
        if (injectedSendErrors.get() > 0 && injectedSendErrors.getAndDecrement() > 0) {
            completeSend(qp, w, injectedStatus, 0);
            toError(qp);
            return;
        }
        if (peer == null || peer.state != QpState.RTS) {
            completeSend(qp, w, WcStatus.RETRY_EXC_ERR, 0);
            toError(qp);
            return;
        }
        long length = Execution.length(w, memory);
        if (length < 0) {
            int s = (int) (-1 - length);
            violation("LOC_PROT_ERR: qp " + qp.qpn + " SEND sge " + s + " (address 0x"
                    + Long.toHexString(w.sgeAddress(s)) + ", " + w.sgeLength(s) + " bytes, lkey 0x"
                    + Integer.toHexString(w.sgeLkey(s)) + ") is not in registered memory");
            completeSend(qp, w, WcStatus.LOC_PROT_ERR, 0);
            toError(qp);
            return;
        }
        if (peer.receiveQueue().isEmpty()) {
            violation("RNR: qp " + qp.qpn + " sent " + length + " bytes to qp " + peer.qpn
                    + " with no receive posted" + (peer.srq != null ? " on its shared receive queue" : ""));
            completeSend(qp, w, WcStatus.RNR_RETRY_EXC_ERR, 0);
            toError(qp);
            toError(peer);
            return;
        }
        Recv r = taken;
        peer.receiveQueue().take(r);
        if (peer.srq != null) {
            peer.srq.consumed();
        }
        int outcome = Execution.deliver(w, length, memory, r);
        if (outcome != Execution.DELIVERED) {
            violation(outcome == Execution.RECEIVE_UNREGISTERED
                    ? "LOC_PROT_ERR: qp " + peer.qpn + " receive is not in registered memory"
                    : "LOC_LEN_ERR: qp " + qp.qpn + " sent " + length + " bytes into a receive of " + r.length
                    + " on qp " + peer.qpn);
            push(peer.cq, new Cqe(peer, r.wrId, Execution.receiveStatus(outcome), Completions.OPCODE_RECV, 0, true,
                    0));
            completeSend(qp, w, Execution.sendStatus(outcome), 0);
            toError(qp);
            toError(peer);
            return;
        }
        // a SEND with immediate data hands it to the receive completion (IBV_WC_WITH_IMM), not to the buffer
        push(peer.cq, new Cqe(peer, r.wrId, WcStatus.SUCCESS, Completions.OPCODE_RECV, (int) length, true, 0,
                w.immediate, r.lkey));
        if (w.signaled) {
            completeSend(qp, w, WcStatus.SUCCESS, (int) length);
        } else {
            qp.completedUnsignaled++;
        }
    }

    void completeSend(FakeQp qp, KeptSend w, int status, int length) {
        // this completion frees its own send queue slot and those of the unsignaled sends before it, at poll time
        int free = 1 + qp.completedUnsignaled;
        qp.completedUnsignaled = 0;
        push(qp.cq, new Cqe(qp, w.wrId, status, Completions.OPCODE_SEND, length, false, free));
    }

    /** Moves a queue pair to error: everything still posted completes with WR_FLUSH_ERR. */
    void toError(FakeQp qp) {
        if (qp.state != QpState.RTS && qp.state != QpState.INIT) {
            return;
        }
        qp.state = QpState.ERROR;
        while (!qp.sq.isEmpty()) {
            completeSend(qp, qp.sq.poll(), WcStatus.WR_FLUSH_ERR, 0);
        }
        Recv r = new Recv();
        while (qp.rq.take(r)) {
            push(qp.cq, new Cqe(qp, r.wrId, WcStatus.WR_FLUSH_ERR, Completions.OPCODE_RECV, 0, true, 0));
        }
    }

    void push(FakeCq cq, Cqe e) {
        if (cq.destroyed) {
            violation("completion for qp " + e.qp().qpn + " on a destroyed completion queue");
            return;
        }
        if (cq.closed) {
            return; // a queue whose destroy was refused (leaked): nobody polls it any more
        }
        if (cq.overrun) {
            return;
        }
        if (cq.entries.size() >= cq.capacity) {
            violation("CQ overrun: completion queue of " + cq.capacity + " entries is full");
            cq.overrun = true;
            for (FakeQp qp : new ArrayList<>(cq.users)) {
                toError(qp);
            }
            cq.signal.signalAll();
            return;
        }
        cq.entries.add(e);
        if (cq.armed) {
            cq.armed = false;
            cq.notified = true;
            cq.signal.signalAll();
        }
    }
}
