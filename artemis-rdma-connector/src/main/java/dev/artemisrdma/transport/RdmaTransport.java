package dev.artemisrdma.transport;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.ToLongFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.api.TlsEngineFactory;
import javax.net.ssl.SSLEngine;
import dev.artemisrdma.transport.tls.TlsChannel;
import dev.artemisrdma.transport.channel.ChannelHost;
import dev.artemisrdma.transport.channel.ChannelSpec;
import dev.artemisrdma.transport.channel.HandshakeDeadline;
import dev.artemisrdma.transport.channel.RdmaChannelImpl;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.ConnectOptions;
import dev.artemisrdma.transport.fabric.ConnectionRejectedException;
import dev.artemisrdma.transport.fabric.ConnectionRequest;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.DeviceListener;
import dev.artemisrdma.transport.fabric.Endpoints;
import dev.artemisrdma.transport.fabric.Fabric;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.FabricListener;
import dev.artemisrdma.transport.fabric.LogLimiter;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairRefusedException;
import dev.artemisrdma.transport.fabric.QueuePairSpec;
import dev.artemisrdma.transport.flow.BufferPool;
import dev.artemisrdma.transport.flow.ReassemblyBudget;
import dev.artemisrdma.transport.flow.SharedReceivePool;
import dev.artemisrdma.transport.loop.CompletionLoop;
import dev.artemisrdma.transport.loop.LoopChannel;
import dev.artemisrdma.transport.loop.SpinBudget;
import dev.artemisrdma.transport.stats.LoopStats;
import dev.artemisrdma.transport.wire.Handshake;

/**
 * The RDMA transport: reliable, ordered, message-preserving channels over RC queue pairs of a {@link Fabric},
 * with receive credits so that a SEND never meets an empty receive queue.
 *
 * <p>Owns, per device, the send buffer pool and the completion loops (created when a connection first uses the
 * device). Closing it closes servers, then channels, then completion queues, then memory.
 *
 * <p>Bounds: every registration counts against {@code maxRegisteredMemory} ({@link AccountedDevice}); loops per
 * device stop at {@code maxCompletionLoops}; an accepted connection must complete its handshake within
 * {@code handshakeTimeout} ({@link HandshakeDeadline}); send buffer slabs idle for {@value #SLAB_IDLE_SECONDS} s are
 * deregistered. A bound that is reached refuses or fails that one connection, with the reason and the key.
 *
 * <p>Threads: {@code connect} runs on the caller's thread; connection requests arrive on the fabric's
 * connection-manager thread ({@link #onRequest}, one at a time); channels report their end from their completion loop
 * ({@link #channelClosed}); the transport's timer trims idle slabs and runs handshake deadlines. What they share is
 * in concurrent collections ({@code channels}, {@code servers}, {@code devices}, {@code sourcePlaces}) and in the
 * per-source counters, each with its own lock; {@link #close} runs once, on whichever thread calls it first.
 */
public final class RdmaTransport implements AutoCloseable, ChannelHost {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaTransport.class);
    // what a peer can make us log at will: LogLimiter.LINES lines per site and interval, then a summary
    private static final LogLimiter REJECTED = LogLimiter.site(LOG, Level.WARN, "rejected connections");
    private static final LogLimiter NOT_ALLOWED = LogLimiter.site(LOG, Level.WARN,
            "connections refused: source not among allowedSources");
    private static final LogLimiter OWN_QUEUE = LogLimiter.site(LOG, Level.INFO,
            "connections that keep their own receive queue");
    private static final LogLimiter REFUSED = LogLimiter.site(LOG, Level.WARN,
            "connections the acceptor refused with an error");
    private static final LogLimiter ACCEPT_FAILED = LogLimiter.site(LOG, Level.WARN, "accepts that failed");
    private static final LogLimiter ASKED_TO_RETRY = LogLimiter.site(LOG, Level.INFO,
            "connections asked to retry while receives are recalled");
    private static final LogLimiter CONNECT_FAILED = LogLimiter.site(LOG, Level.WARN,
            "connections whose handshake answer was wrong");
    private static final AtomicLong TRANSPORTS = new AtomicLong();
    /** Send buffer slabs entirely free for this long go back to the device. */
    static final long SLAB_IDLE_SECONDS = 30;

    private final Fabric fabric;
    private final TransportConfig config;
    private final String name;
    private final AtomicLong channelIds = new AtomicLong();
    private final Map<FabricDevice, DeviceResources> devices = new ConcurrentHashMap<>();
    private final Set<RdmaChannelImpl> channels = ConcurrentHashMap.newKeySet();
    private final Set<RdmaServer> servers = ConcurrentHashMap.newKeySet();
    private final ReassemblyBudget reassemblyBudget;
    /** Accepted connections whose handshake has not finished: capped in total and per source. */
    private final HandshakeBacklog backlog;
    /** Connections per source on this transport's acceptors (maxConnectionsPerSource), and each one's place. */
    private final SourceConnections sourceConnections;
    /** Closed connections whose rdma_cm id is not destroyed yet, per source. */
    private final DestroyBacklog destroys;
    private final Map<RdmaChannel, SourcePlace> sourcePlaces = new ConcurrentHashMap<>();

    /**
     * An accepted channel's places: among its source's connections ({@code release}, given back when the channel is
     * gone) and among its unfinished handshakes ({@code handshake}, idempotent: given back when the handshake
     * succeeds, or else once the channel's rdma_cm id is destroyed).
     */
    private record SourcePlace(SourceKey source, Runnable release, Runnable handshake) {
    }
    private final ScheduledExecutorService timer;
    private final DeviceListener deviceListener = this::deviceLost;
    /** What all completion loops of this transport may spin together. */
    private final SpinBudget spinBudget = new SpinBudget();
    /** Read on every path that must refuse work once close began; set once, by the one closer. */
    private volatile boolean closed;
    /** Runs the closes of TLS handshakes past their deadline (2 threads, idle ones end). */
    private final ExecutorService tlsClosers;
    private final java.util.concurrent.atomic.AtomicBoolean closing = new java.util.concurrent.atomic.AtomicBoolean();
    /** How long closing waits for each completion loop's thread (see {@link CompletionLoop#stop}). */
    private volatile long loopStopWaitMillis = CompletionLoop.STOP_WAIT_MILLIS;

    private RdmaTransport(Fabric fabric, TransportConfig config) {
        this.fabric = fabric;
        this.config = config;
        this.name = "rdma-" + TRANSPORTS.incrementAndGet();
        this.reassemblyBudget = new ReassemblyBudget(config.reassemblyMemory());
        this.sourceConnections = new SourceConnections(config.maxConnectionsPerSource());
        this.destroys = new DestroyBacklog();
        ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, r -> {
            Thread thread = new Thread(r, name + "-timer");
            thread.setDaemon(true);
            thread.setUncaughtExceptionHandler((th, e) -> LOG.error("{}: {} died", name, th.getName(), e));
            return thread;
        });
        t.setRemoveOnCancelPolicy(true);
        this.timer = t;
        this.backlog = new HandshakeBacklog(config.maxPendingConnections(), config.maxPendingConnectionsPerSource(),
                config.handshakeTimeout(), timer);
        // closes a TLS handshake's deadline asks for: a close waits for its channel, the timer must not
        ThreadPoolExecutor closers = new ThreadPoolExecutor(2, 2, 30, TimeUnit.SECONDS, new LinkedBlockingQueue<>(),
                r -> {
                    Thread thread = new Thread(r, name + "-tls-close");
                    thread.setDaemon(true);
                    return thread;
                });
        closers.allowCoreThreadTimeOut(true);
        this.tlsClosers = closers;
        timer.scheduleWithFixedDelay(this::trimIdleSlabs, SLAB_IDLE_SECONDS, SLAB_IDLE_SECONDS, TimeUnit.SECONDS);
        timer.scheduleWithFixedDelay(LogLimiter::flushAll, 1, 1, TimeUnit.SECONDS); // summaries of quiet sites
        fabric.addDeviceListener(deviceListener);
    }

    /** How long a lost device's connections get to release before its loops and memory are, at the latest. */
    static final long DEVICE_RELEASE_WAIT_MILLIS = 10_000;
    /**
     * How long {@link #connect} goes on retrying a listener that refused it while a shared pool recalls idle grown
     * windows ({@link RecallPending}): peers answer a recall within a round trip or two, and pools recall at most every
     * 250 ms. Within {@code connectTimeout}.
     */
    static final long RECALL_RETRY_NANOS = TimeUnit.SECONDS.toNanos(1);
    /** The first pause before such a retry; each further one doubles, up to {@link #RECALL_RETRY_PAUSE_MAX_MILLIS}. */
    static final long RECALL_RETRY_PAUSE_MILLIS = 5;
    static final long RECALL_RETRY_PAUSE_MAX_MILLIS = 80;

    /**
     * A device went away. Its connections fail through their own queue pair events; once they are released, the
     * device's completion loops stop (destroying their completion queues) and its send buffer slabs are deregistered,
     * then the fabric is told it may free the device. Never blocks the fabric's thread.
     */
    private void deviceLost(FabricDevice device, String reason) {
        FabricDevice raw = device instanceof AccountedDevice a ? a.raw() : device;
        DeviceResources res = devices.get(raw);
        if (res == null) {
            fabric.releaseDevice(device, deviceListener);
            return;
        }
        if (closed) {
            // close() is releasing this device's channels, loops and memory; its removeDeviceListener lets go of the
            // device after that. Letting go now would have the fabric free the device's leftovers (completion queues
            // still polled, memory still posted) and its protection domain under the queue pairs still closing
            return;
        }
        LOG.warn("{}: {}; its completion loops and memory are released once its connections are gone", name,
                reason);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(DEVICE_RELEASE_WAIT_MILLIS);
        try {
            timer.execute(() -> releaseWhenIdle(res, deadline));
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // closing: close() releases everything
        }
    }

    private void releaseWhenIdle(DeviceResources res, long deadline) {
        boolean busy = channels.stream().anyMatch(ch -> ch.usesPool(res.pool));
        if (busy && System.nanoTime() - deadline < 0) {
            timer.schedule(() -> releaseWhenIdle(res, deadline), 50, TimeUnit.MILLISECONDS);
            return;
        }
        if (busy) {
            // its completion queues and memory may still be in use: freeing them could crash the JVM
            LOG.error("{}: connections on the removed device {} were not released within {} ms; its completion "
                    + "queues and memory stay (the kernel cannot finish removing the device until they go)", name,
                    res.device.name(), DEVICE_RELEASE_WAIT_MILLIS);
            return;
        }
        devices.remove(res.device, res);
        for (CompletionLoop loop : res.loops) {
            loop.requestStop();
        }
        for (CompletionLoop loop : res.loops) {
            loop.stop(loopStopWaitMillis);
        }
        res.releaseAfterLoops(() -> {
            LOG.info("{}: released the completion loops and memory of the removed device {}", name,
                    res.device.name());
            fabric.releaseDevice(res.device, deviceListener);
        });
    }

    public static RdmaTransport create(Fabric fabric, TransportConfig config) {
        if (fabric == null || config == null) {
            throw new IllegalArgumentException("fabric and config are required");
        }
        return new RdmaTransport(fabric, config);
    }

    /** Tests: a shorter wait for loop threads at close, to see what happens to one that outlives it. */
    RdmaTransport loopStopWait(java.time.Duration wait) {
        loopStopWaitMillis = wait.toMillis();
        return this;
    }

    public TransportConfig config() {
        return config;
    }

    /**
     * Listens on {@code bind}. Each peer that passes the handshake is offered to {@code acceptor}; a peer that is
     * not ours, or speaks another protocol version, is rejected with the reason (and logged) without disturbing
     * anything else.
     */
    public RdmaServer listen(InetSocketAddress bind, ChannelAcceptor acceptor) throws FabricException {
        return listen(bind, acceptor, null);
    }

    /**
     * Listens as {@link #listen(InetSocketAddress, ChannelAcceptor)}, speaking TLS when {@code tls} is not null: both
     * sides state it in the handshake (a peer that does not is refused, the reason naming sslEnabled), and each
     * connection is offered to {@code acceptor} only once its TLS handshake is done.
     */
    public RdmaServer listen(InetSocketAddress bind, ChannelAcceptor acceptor, TlsEngineFactory tls)
            throws FabricException {
        checkOpen();
        ChannelAcceptor served = tls == null ? acceptor : new TlsListening(acceptor, tls, timer, tlsClosers);
        boolean speaksTls = tls != null;
        RdmaServer[] self = new RdmaServer[1];
        ListenerStats stats = new ListenerStats();
        FabricListener listener = fabric.listen(bind, config.addressing(),
                request -> onRequest(stats.counting(request), stats, served, speaksTls));
        stats.countUnreadOf(listener);
        RdmaServer server = new RdmaServer(listener, () -> servers.remove(self[0]), stats);
        self[0] = server;
        servers.add(server);
        LOG.info("{}: listening on {}{} (sources: {}, at most {} connections each)", name,
                describe(listener.localAddress()), speaksTls ? " with TLS" : "", config.allowedSources(),
                config.maxConnectionsPerSource());
        return server;
    }

    /**
     * Connects to a listening peer; blocks until established, refused or {@code connectTimeout} passed. A listener
     * that refuses because its shared pools are recalling room ({@link RecallPending}) is asked again, for up to
     * {@link #RECALL_RETRY_NANOS}: the listener never waits for the recall on its connection-manager thread.
     */
    public RdmaChannel connect(InetSocketAddress remote, ChannelHandler handler) throws FabricException {
        return connect(remote, handler, null);
    }

    /**
     * Connects as {@link #connect(InetSocketAddress, ChannelHandler)}, speaking TLS when {@code tls} is not null: the
     * call returns once the TLS handshake is done too, within connectTimeout plus the factory's handshake timeout.
     */
    public RdmaChannel connect(InetSocketAddress remote, ChannelHandler handler, TlsEngineFactory tls)
            throws FabricException {
        checkOpen();
        if (handler == null) {
            throw new IllegalArgumentException("handler is required");
        }
        if (tls == null) {
            return connectRetrying(remote, handler, false);
        }
        SSLEngine engine;
        try {
            engine = tls.newEngine(remote); // before the connection: a configuration that cannot work costs none
        } catch (RuntimeException e) {
            throw new FabricException("connect to " + describe(remote) + " failed: TLS: " + e.getMessage(), e);
        }
        TlsChannel secured = TlsChannel.forConnector(engine, handler);
        RdmaChannel wire = connectRetrying(remote, secured, true);
        secured.startClient(wire, tls);
        return secured;
    }

    private RdmaChannel connectRetrying(InetSocketAddress remote, ChannelHandler handler, boolean speaksTls)
            throws FabricException {
        if (handler == null) {
            throw new IllegalArgumentException("handler is required");
        }
        long start = System.nanoTime();
        long retryFor = Math.min(RECALL_RETRY_NANOS, config.connectTimeout().toNanos());
        long pause = RECALL_RETRY_PAUSE_MILLIS;
        while (true) {
            try {
                return connectOnce(remote, handler, speaksTls);
            } catch (RecallPending e) {
                long waited = System.nanoTime() - start;
                if (waited + TimeUnit.MILLISECONDS.toNanos(pause) > retryFor) {
                    throw new FabricException(e.getMessage() + " (still refused after retrying for "
                            + TimeUnit.NANOSECONDS.toMillis(waited) + " ms: the listener's completion loops stay "
                            + "full; raise maxCompletionLoops or sharedReceiveSlots there)", e);
                }
            }
            try {
                Thread.sleep(pause); // the caller's thread, which waits for the connection anyway
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new FabricException("connect to " + describe(remote) + " interrupted");
            }
            pause = Math.min(RECALL_RETRY_PAUSE_MAX_MILLIS, pause * 2);
            checkOpen();
        }
    }

    private RdmaChannel connectOnce(InetSocketAddress remote, ChannelHandler handler, boolean speaksTls)
            throws FabricException {
        RdmaChannelImpl ch = new RdmaChannelImpl(this, config, nextId(), remote, null, handler,
                ChannelSpec.connecting(speaksTls));
        channels.add(ch);
        ConnectOptions options = new ConnectOptions(Handshake.encodeConnect(ch.localParams()),
                config.rnrRetryCount(), config.retryCount(), config.connectTimeout(), config.addressing());
        QueuePair qp;
        try {
            qp = fabric.connect(remote, accounted(ch.setup()), options, ch.events());
        } catch (ConnectionRejectedException e) {
            String reason = Handshake.decodeReject(e.rejectData());
            // not one of ours (no listener, or not our protocol there): the fabric's own words say more
            String what = Handshake.isOurReject(e.rejectData()) ? "rejected by " + describe(remote) + ": " + reason
                    : e.getMessage();
            FabricException why = Handshake.isOurReject(e.rejectData()) && RecallPending.isReason(reason)
                    ? new RecallPending(what, e) : new FabricException(what, e);
            ch.setupFailed(why, false);
            // the caller decides how loud: a connector retrying for ever reports an outage once, not each attempt
            LOG.debug("{}: connection {} {}", name, ch.id(), why.getMessage());
            throw why;
        } catch (FabricException | RuntimeException e) {
            ch.setupFailed(e instanceof FabricException ? (FabricException) e
                    : new FabricException("connect to " + describe(remote) + " failed: " + e, e), false);
            throw e;
        }
        try {
            Handshake.Params peer = Handshake.decodeAccept(qp.peerPrivateData());
            if (peer.speaksTls() != speaksTls) {
                throw new FabricException(speaksTls
                        ? "the listener does not speak TLS: sslEnabled=true here, so it must be true there too (a "
                                + "listener from before 0.2.0 has no TLS)"
                        : "the listener speaks TLS: set sslEnabled=true (and a trust store) here");
            }
            ch.activeEstablished(peer);
        } catch (Handshake.HandshakeException | FabricException e) {
            FabricException why = new FabricException("connect to " + describe(remote) + " failed: "
                    + e.getMessage());
            if (CONNECT_FAILED.admit()) {
                LOG.warn("{}: connection {}: {}", name, ch.id(), why.getMessage());
            }
            ch.failHandshake(why);
            throw why;
        }
        return ch;
    }

    /** Refuses {@code request} with {@code why}, which the peer reads as the reason; logged through the limiter. */
    private void rejectLogged(ConnectionRequest request, InetSocketAddress peerAddress, String why) {
        if (REJECTED.admit()) {
            LOG.warn("{}: rejected connection from {}: {}", name, describe(peerAddress), why);
        }
        request.reject(Handshake.encodeReject(why));
    }

    private void onRequest(ConnectionRequest request, ListenerStats stats, ChannelAcceptor acceptor,
                           boolean speaksTls) {
        InetSocketAddress peerAddress = request.peerAddress();
        if (!config.allowedSources().allows(peerAddress.getAddress())) {
            // before anything else: a source that may not connect costs a reject, nothing more
            if (NOT_ALLOWED.admit()) {
                LOG.warn("{}: rejected connection from {} to {}: not among allowedSources {}", name,
                        describe(peerAddress), describe(request.localAddress()), config.allowedSources());
            }
            request.reject(Handshake.encodeReject("source " + peerAddress.getAddress().getHostAddress()
                    + " is not among the acceptor's allowedSources"));
            return;
        }
        Handshake.Params peer;
        try {
            peer = Handshake.decodeConnect(request.privateData());
        } catch (Handshake.HandshakeException e) {
            stats.protocolError();
            if (REJECTED.admit()) {
                LOG.warn("{}: rejected connection from {} to {}: {}", name, describe(peerAddress),
                        describe(request.localAddress()), e.getMessage());
            }
            request.reject(Handshake.encodeReject(e.getMessage()));
            return;
        }
        if (closed) {
            request.reject(Handshake.encodeReject("server is shutting down"));
            return;
        }
        if (peer.speaksTls() != speaksTls) {
            // both sides state TLS or neither: a plain peer never reaches a TLS acceptor's application, nor the reverse
            rejectLogged(request, peerAddress, speaksTls
                    ? "this acceptor speaks TLS only: set sslEnabled=true (and a trust store) on the connector"
                    : "this acceptor does not speak TLS: set sslEnabled=false on the connector, or use a TLS "
                            + "acceptor");
            return;
        }
        String device = config.device();
        if (device != null && !device.equals(request.device().name())) {
            // a wildcard listener with a device named: rdma_cm listens on every device, we serve only the named one
            if (REJECTED.admit()) {
                LOG.warn("{}: rejected connection from {} to {}: it arrived on device {}, this endpoint serves "
                        + "device={} only", name, describe(peerAddress), describe(request.localAddress()),
                        request.device().name(), device);
            }
            request.reject(Handshake.encodeReject("this endpoint accepts connections on RDMA device " + device
                    + " only, this one arrived on " + request.device().name()));
            return;
        }
        // an unfinished handshake holds a queue pair, memory and a loop slot: capped in total and per source
        SourceKey source = SourceKey.of(peerAddress.getAddress(), config.ipv4SourcePrefix(),
                config.ipv6SourcePrefix());
        String destroysWaiting = destroys.refusal(source);
        if (destroysWaiting != null) {
            // a source whose closed connections' ids still wait in the kernel (it drops CM messages) gets no more
            rejectLogged(request, peerAddress, destroysWaiting);
            return;
        }
        HandshakeBacklog.Place place = backlog.tryAdmit(source);
        if (place == null) {
            String why = backlog.refusal(source);
            rejectLogged(request, peerAddress, why);
            return;
        }
        // every connection a source holds, pending or established, is capped too
        Runnable slot = sourceConnections.tryAdmit(source);
        if (slot == null) {
            String why = sourceConnections.refusal(source);
            rejectLogged(request, peerAddress, why);
            place.run();
            return;
        }
        boolean handedOver = false;
        boolean slotHandedOver = false;
        try {
            boolean sharing = resources(request.device()).fit.sharesReceives();
            // the application's side of the connection (for Artemis, its Connection) is made only once the peer
            // finished connecting: an unfinished handshake costs it nothing
            ChannelSpec spec = new ChannelSpec(speaksTls, peer, sharing && peer.acceptsCreditGrowth(),
                    peer.answersCreditRecall(), // a window that cannot be recalled does not grow
                    pool(request.device()), acceptor::onAccepted);
            RdmaChannelImpl ch;
            try {
                ch = new RdmaChannelImpl(this, config, nextId(), peerAddress, request.localAddress(), null, spec);
            } catch (FabricException e) {
                rejectLogged(request, peerAddress, e.getMessage());
                return;
            }
            if (sharing && !peer.acceptsCreditGrowth() && OWN_QUEUE.admit()) {
                LOG.info("{}: connection from {} keeps its own receive queue: the peer predates shared receive "
                        + "queues (its handshake does not state credit growth)", name, describe(peerAddress));
            }
            try {
                acceptor.admit(ch);
            } catch (RuntimeException | Error e) {
                if (REFUSED.admit()) {
                    LOG.warn("{}: connection from {} refused by the acceptor: {}", name, describe(peerAddress),
                            e.toString());
                }
                request.reject(Handshake.encodeReject("refused by the application: " + e.getMessage()));
                return;
            }
            sourcePlaces.put(ch, new SourcePlace(source, slot, place)); // given back when the channel is gone
            slotHandedOver = true;
            channels.add(ch);
            HandshakeDeadline deadline = new HandshakeDeadline(ch, ch.events(), config.handshakeTimeout(), timer,
                    place::established, place::expired);
            handedOver = true; // the handshake's end gives the place back
            try {
                // a refusal here still rejects with its reason
                ch.bindBeforeAccept(resources(request.device()).accounted);
                request.accept(accounted(ch.setup()), Handshake.encodeAccept(ch.localParams()),
                        config.rnrRetryCount(), deadline);
            } catch (FabricException | RuntimeException e) {
                deadline.failed();
                boolean retry = RecallPending.isCause(e);
                if (retry ? ASKED_TO_RETRY.admit() : ACCEPT_FAILED.admit()) {
                    LOG.atLevel(retry ? Level.INFO : Level.WARN).log("{}: accepting {} from {} failed: {}", name,
                            ch.id(), describe(peerAddress), e.getMessage());
                }
                try {
                    request.reject(Handshake.encodeReject(retry ? RecallPending.reason(e)
                            : "server cannot take the connection: " + e.getMessage()));
                } catch (RuntimeException ignored) {
                    // the request may already be consumed by the failed accept
                }
                ch.setupFailed(new FabricException("accepting the connection from " + describe(peerAddress)
                        + " failed: " + e.getMessage(), e), true);
            }
        } finally {
            if (!handedOver) {
                place.run();
            }
            if (!slotHandedOver) {
                slot.run();
            }
        }
    }

    /** The heap all channels together may hold for reassembly ({@code reassemblyMemory}). */
    @Override
    public ReassemblyBudget reassemblyBudget() {
        return reassemblyBudget;
    }

    /**
     * The channel's setup, registering its memory on the transport's accounted view of the device, its queue pair
     * fitted to what the device allows ({@link DeviceFit}). One per connection attempt, on the thread creating the
     * queue pair.
     */
    private ConnectionSetup accounted(ConnectionSetup setup) {
        return new ConnectionSetup() {
            private DeviceFit fit;
            private QueuePairSpec lastAsked;
            private String refusal;

            @Override
            public QueuePairSpec queuePairSpec(FabricDevice device) throws FabricException {
                DeviceResources res = resources(device);
                fit = res.fit;
                lastAsked = fit.fit(setup.queuePairSpec(res.accounted));
                return lastAsked;
            }

            @Override
            public QueuePairSpec afterRefusal(FabricDevice device, QueuePairSpec refused,
                                              QueuePairRefusedException why) throws FabricException {
                refusal = why.getMessage();
                lastAsked = fit.afterRefusal(refused, why);
                return lastAsked;
            }

            @Override
            public void prepare(QueuePair queuePair) throws FabricException {
                if (refusal != null) {
                    fit.accepted(lastAsked.maxInlineData(), refusal);
                }
                setup.prepare(queuePair);
            }
        };
    }

    /** Registered bytes this transport holds on {@code device} (connections and send buffers). */
    long registeredBytes(FabricDevice device) {
        return resources(device).accounted.registeredBytes();
    }

    /** Completion loops in service on {@code device}. */
    int completionLoops(FabricDevice device) {
        return resources(device).loops.size();
    }

    private void trimIdleSlabs() {
        try {
            for (DeviceResources res : devices.values()) {
                res.pool.trim(System.nanoTime(), TimeUnit.SECONDS.toNanos(SLAB_IDLE_SECONDS));
            }
        } catch (RuntimeException | Error e) {
            LOG.error("{}: returning idle send buffer slabs failed", name, e);
        }
    }

    private String nextId() {
        return name + "-c" + channelIds.incrementAndGet();
    }

    /** The send buffer pool of a device. */
    @Override
    public BufferPool pool(FabricDevice device) {
        return resources(device).pool;
    }

    /**
     * Finds a completion loop on {@code device} with room for a channel of {@code entries}, the least loaded first.
     * When every queue is full another loop (thread and queue) is added: a completion queue holds a bounded number
     * of connections, and a broker must not refuse clients because its first queues filled up.
     */
    @Override
    public CompletionLoop.Assignment assignLoop(FabricDevice device, LoopChannel channel, int entries)
            throws FabricException {
        checkOpen();
        DeviceResources res = resources(device);
        CompletionLoop.Assignment found = res.tryAssign(channel, entries);
        if (found != null) {
            return found;
        }
        synchronized (res) {
            found = res.tryAssign(channel, entries); // another thread may have added a loop meanwhile
            if (found != null) {
                return found;
            }
            checkOpen();
            if (res.loops.size() < config.maxCompletionLoops()) {
                return addLoop(res, channel, entries);
            }
        }
        if (channel.sharesReceives() && res.recallUnderWay()) {
            // every loop is full, but a shared pool is recalling idle grown windows (the refusal that brought us here
            // asked for it): their peers give credits back within a round trip or two. Nothing waits for that on the
            // connection-manager thread: the peer is refused now and asked to retry (connect does, for a second).
            throw new RecallPending("all " + res.loops.size() + " loops are full on " + device.name()
                    + "; idle receives are being recalled");
        }
        throw new FabricException("completion loop limit (raise maxCompletionLoops) reached on " + device.name()
                + ": all " + res.loops.size() + " loops are full");
    }

    /**
     * A refusal that asks the peer to retry at once: every completion loop is full while a shared pool recalls idle
     * grown windows. The listener raises it, the reject carries it ({@link #PREFIX}), and {@link #connect} retries.
     */
    static final class RecallPending extends FabricException {

        /** How the reject reason starts; an older peer reads the rest as any refusal ('loops are full'). */
        static final String PREFIX = "retry soon: ";

        RecallPending(String message) {
            super(message);
        }

        RecallPending(String message, Throwable cause) {
            super(message, cause);
        }

        static boolean isReason(String rejectReason) {
            return rejectReason.startsWith(PREFIX);
        }

        static boolean isCause(Throwable t) {
            for (Throwable c = t; c != null; c = c.getCause()) {
                if (c instanceof RecallPending) {
                    return true;
                }
            }
            return false;
        }

        /** The reject reason for {@code t}, a {@link #isCause} one. */
        static String reason(Throwable t) {
            Throwable c = t;
            while (!(c instanceof RecallPending)) {
                c = c.getCause();
            }
            return PREFIX + c.getMessage();
        }
    }

    /** Adds a loop (thread, queue) on the device for {@code channel}; under the device's lock. */
    private CompletionLoop.Assignment addLoop(DeviceResources res, LoopChannel channel, int entries)
            throws FabricException {
        FabricDevice device = res.device;
        CompletionLoop added = res.addLoop();
        int index = added.register(channel, entries);
        if (index < 0) {
            res.loops.remove(added);
            added.stop();
            throw new FabricException("no completion queue has room for a connection: it needs " + entries
                    + " completion queue entries, more than one queue on " + device.name() + " holds"
                    + queueLimitAdvice(device));
        }
        LOG.info("{}: completion queues on {} are full ({} connections); added completion loop {}", name,
                device.name(), channels.size(), added);
        return new CompletionLoop.Assignment(added, index);
    }

    /** What bounds a completion queue on {@code device}, and what to change: " (limit): advice". */
    private String queueLimitAdvice(FabricDevice device) {
        int deviceMax = device.limits() == null ? 0 : device.limits().maxCqe();
        if (deviceMax > 0 && deviceMax < config.completionQueueEntries()) {
            return " (the device's maximum is " + deviceMax + "): lower receiveSlots or sendQueueDepth";
        }
        return " (completionQueueEntries " + config.completionQueueEntries()
                + "): raise completionQueueEntries, or lower receiveSlots or sendQueueDepth";
    }

    private DeviceResources resources(FabricDevice device) {
        FabricDevice raw = device instanceof AccountedDevice a ? a.raw() : device;
        return devices.computeIfAbsent(raw, d -> new DeviceResources(d, name, config, spinBudget));
    }

    @Override
    public void channelClosed(RdmaChannel channel) {
        channels.remove(channel);
        SourcePlace slot = sourcePlaces.remove(channel);
        if (slot != null) {
            slot.release().run();
            if (channel instanceof RdmaChannelImpl impl) {
                // its rdma_cm id may outlive it by a minute (an unanswered DREQ): counted against its source until
                // destroyed, so that one host cannot pile them up (DestroyBacklog); a handshake that never finished
                // keeps its place in the backlog until then too (its queue pair is the kernel's until destroyed)
                Runnable waiting = destroys.waiting(slot.source());
                Runnable handshake = slot.handshake();
                impl.whenGone(() -> {
                    handshake.run();
                    waiting.run();
                });
            } else {
                slot.handshake().run();
            }
        }
    }

    private void checkOpen() throws FabricException {
        if (closed) {
            throw new FabricException("transport " + name + " is closed");
        }
    }

    /** Live channels, for tests and monitoring. */
    public int channelCount() {
        return channels.size();
    }

    /**
     * What the completion loops did (spins, wake-ups, blocked time, thread CPU), summed over every loop this transport
     * made on any device, those that already stopped included: for monitoring and benchmarks.
     */
    public LoopStats loopStats() {
        LoopStats sum = LoopStats.NONE;
        for (DeviceResources res : devices.values()) {
            for (CompletionLoop loop : res.allLoops) {
                sum = sum.plus(loop.stats());
            }
        }
        return sum.plus(new LoopStats(0, 0, 0, 0, 0, 0, 0, 0, spinBudget.exhaustedPeriods()));
    }

    /** The loops in service on {@code device}, for tests. */
    List<CompletionLoop> loops(FabricDevice device) {
        return List.copyOf(resources(device).loops);
    }

    /** Bytes registered by the send buffer pools (shared by every channel of this transport), for monitoring. */
    public long sendPoolBytes() {
        long sum = 0;
        for (DeviceResources res : devices.values()) {
            sum += res.pool.registeredBytes();
        }
        return sum;
    }

    /** Bytes registered by the shared receive pools of this transport's completion loops, for monitoring. */
    public long sharedReceivePoolBytes() {
        long sum = 0;
        for (DeviceResources res : devices.values()) {
            for (CompletionLoop loop : res.loops) {
                SharedReceivePool p = loop.sharedPool();
                sum += p == null ? 0 : p.registeredBytes();
            }
        }
        return sum;
    }

    /**
     * Receive credits that connections with a grown window gave back to a shared pool that recalled them, since the
     * transport started (pools of loops taken out of service included), for monitoring.
     */
    public long sharedReceiveCreditsRecalled() {
        return sumOverEveryPool(SharedReceivePool::creditsReleased);
    }

    /**
     * Recalls the shared pools made, since the transport started (pools of loops taken out of service included), for
     * monitoring: each asked every connection whose window had grown to give back what it holds beyond the minimum.
     * Recalls that go on while {@link #sharedReceiveCreditsRecalled} stays put mean busy connections keep their
     * windows: the pools are too small for the load.
     */
    public long sharedReceiveRecalls() {
        return sumOverEveryPool(SharedReceivePool::recalls);
    }

    private long sumOverEveryPool(ToLongFunction<SharedReceivePool> counter) {
        long sum = 0;
        for (DeviceResources res : devices.values()) {
            for (CompletionLoop loop : res.allLoops) {
                SharedReceivePool p = loop.sharedPool();
                sum += p == null ? 0 : counter.applyAsLong(p);
            }
        }
        return sum;
    }

    /** Shared receive pools in service (one per completion loop that serves accepted connections with one). */
    public int sharedReceivePools() {
        int n = 0;
        for (DeviceResources res : devices.values()) {
            for (CompletionLoop loop : res.loops) {
                n += loop.sharedPool() == null ? 0 : 1;
            }
        }
        return n;
    }

    /** Every byte this transport has registered on all devices: connections, send buffers, shared pools. */
    public long registeredBytes() {
        long sum = 0;
        for (DeviceResources res : devices.values()) {
            sum += res.accounted.registeredBytes();
        }
        return sum;
    }

    @Override
    public void close() {
        if (!closing.compareAndSet(false, true)) {
            return; // one closer: a second close() (any thread) must not tear down what the first is tearing down
        }
        closed = true;
        timer.shutdownNow();
        tlsClosers.shutdown();
        for (RdmaServer s : new ArrayList<>(servers)) {
            s.close();
        }
        // orderly closes in parallel, then forced ones for what is left; bounded whatever the peers do (see there)
        BoundedClose.closeAll(name, new ArrayList<>(channels), ch -> ch.id() + " to " + describe(ch.remoteAddress()),
                RdmaChannelImpl::close, BoundedClose.channelOrderlyBound(config),
                RdmaChannelImpl::forceClose, BoundedClose.channelForcedBound());
        for (DeviceResources res : devices.values()) {
            for (CompletionLoop loop : res.loops) {
                loop.requestStop(); // all at once: each ends within its current blocking wait
            }
        }
        for (DeviceResources res : devices.values()) {
            for (CompletionLoop loop : res.loops) {
                loop.stop(loopStopWaitMillis);
            }
        }
        for (DeviceResources res : devices.values()) {
            res.releaseAfterLoops(() -> { });
        }
        devices.clear();
        fabric.removeDeviceListener(deviceListener);
        LOG.info("{}: closed", name);
    }

    /** See {@link Endpoints#describe}. */
    public static String describe(InetSocketAddress a) {
        return Endpoints.describe(a);
    }

    /** What the transport holds per device: its send buffer pool and completion loops (more are added as needed). */
    private static final class DeviceResources {
        final FabricDevice device;
        final AccountedDevice accounted;
        /** What this transport asks of the device, fitted to its limits. */
        final DeviceFit fit;
        final String transportName;
        final TransportConfig config;
        final BufferPool pool;
        /** Loops in service; a failed one leaves at once (it finishes dying on its own). */
        final List<CompletionLoop> loops = new CopyOnWriteArrayList<>();
        /** Every loop made here, in service or not: their statistics stay in the totals. */
        final List<CompletionLoop> allLoops = new CopyOnWriteArrayList<>();
        final SpinBudget spinBudget;
        private int loopsMade;

        DeviceResources(FabricDevice device, String transportName, TransportConfig config, SpinBudget spinBudget) {
            this.spinBudget = spinBudget;
            this.device = device;
            this.accounted = new AccountedDevice(device, config.maxRegisteredMemory());
            this.fit = new DeviceFit(transportName, device, config);
            this.transportName = transportName;
            this.config = config;
            pool = new BufferPool(accounted);
            for (int i = 0; i < config.completionThreads(); i++) {
                addLoop();
            }
        }

        synchronized CompletionLoop addLoop() {
            CompletionLoop loop = new CompletionLoop(transportName + "-" + device.name() + "-cq" + loopsMade++,
                    accounted, config, loops::remove, spinBudget);
            loops.add(loop);
            allLoops.add(loop);
            return loop;
        }

        /**
         * Deregisters the send buffers once every loop made on the device has exited (a loop thread still running,
         * stuck in a handler or still draining, may post from them), then runs {@code then}: at once when they all
         * have, else on the last loop thread to exit.
         */
        void releaseAfterLoops(Runnable then) {
            java.util.concurrent.atomic.AtomicInteger running = new java.util.concurrent.atomic.AtomicInteger(
                    allLoops.size() + 1);
            Runnable last = () -> {
                if (running.decrementAndGet() == 0) {
                    pool.close();
                    then.run();
                }
            };
            for (CompletionLoop loop : allLoops) {
                loop.whenExited(last);
            }
            last.run();
        }

        /** Whether a shared pool of a loop in service is recalling grown windows now. */
        boolean recallUnderWay() {
            long now = System.nanoTime();
            for (CompletionLoop loop : loops) {
                SharedReceivePool p = loop.sharedPool();
                if (p != null && p.recallUnderWay(now)) {
                    return true;
                }
            }
            return false;
        }

        /** Registers with the least loaded loop that has room; null when none has. */
        CompletionLoop.Assignment tryAssign(LoopChannel channel, int entries) throws FabricException {
            List<CompletionLoop> byLoad = new ArrayList<>(loops);
            byLoad.sort(java.util.Comparator.comparingInt(CompletionLoop::load));
            for (CompletionLoop loop : byLoad) {
                int index = loop.register(channel, entries);
                if (index >= 0) {
                    return new CompletionLoop.Assignment(loop, index);
                }
            }
            return null;
        }
    }
}
