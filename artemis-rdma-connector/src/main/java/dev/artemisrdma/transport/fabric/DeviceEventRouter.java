package dev.artemisrdma.transport.fabric;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Predicate;

/**
 * Maps device events onto the queue pairs they hit, for fabric implementations. A fatal device error fails every
 * queue pair on the device at once, a queue pair error that one queue pair; each hears
 * {@link QueuePairEvents#disconnected} with a reason naming the device, the port or queue pair, and the event, so
 * Artemis fails the connection over at once instead of waiting for pings.
 *
 * <p>A port going down fails nothing at once. A reliable connected queue pair retransmits for its retry budget,
 * (retryCount + 1) x 4.096 us x 2^ackTimeout, before it gives up, so a link that comes back within that (a flap, a
 * cable reseated) costs no connection. Each queue pair on the port is therefore checked once its budget (given to
 * {@link #register}) after the port went down: if the port is still down then, it fails, with a reason naming the
 * port, the device, the event and the budget. A queue pair with sends outstanding usually fails by itself at about
 * that time (IBV_WC_RETRY_EXC_ERR); the check is what fails the idle ones, which send nothing and so never learn.
 * The port coming back ends the outage and cancels its checks. Each outage has a generation of its own, so a check
 * left from an earlier outage never fails a queue pair in a later one: a port that goes down, up and down again gives
 * its queue pairs a fresh, full budget.
 *
 * <p>The fabric registers each queue pair with its device, port and budget while it lives, and closes the router
 * when it closes. Thread-safe; events are handled on the caller's thread (the fabric's event thread), the checks on
 * one daemon thread of the router's own ({@value #THREAD_NAME}), started at the first port-down, which fails what a
 * check found through the fabric's executor when it gave one (its event thread), else itself.
 */
public final class DeviceEventRouter implements AutoCloseable {

    /** The thread that runs the port-down checks. */
    public static final String THREAD_NAME = "rdma-port-grace";

    private static final Logger LOG = LoggerFactory.getLogger(DeviceEventRouter.class);
    /** A peer can make its queue pairs fail at will (QP_REQ_ERR, QP_ACCESS_ERR): limited, summarised. */
    private static final LogLimiter FAILING_FAILED = LogLimiter.site(LOG, Level.ERROR,
            "connections whose failing on a device event failed");
    private static final LogLimiter QUEUE_PAIR_FAILED = LogLimiter.site(LOG, Level.WARN,
            "queue pairs that went to error");

    private record Entry(QueuePair queuePair, String device, int port, Duration grace, QueuePairEvents events) {
    }

    private record Port(String device, int port) {
    }

    /** One period of a port being down, from the event that took it down to the one that brought it back. */
    private static final class Outage {
        final long generation;
        /** The event's name (IBV_EVENT_PORT_ERR), for the reasons. */
        final String event;
        final long sinceNanos;
        /** Queue pairs on the port with a check pending: neither failed by it nor gone when the port came back. */
        final Set<QueuePair> waiting = new HashSet<>();
        final List<ScheduledFuture<?>> checks = new ArrayList<>();

        Outage(long generation, String event, long sinceNanos) {
            this.generation = generation;
            this.event = event;
            this.sinceNanos = sinceNanos;
        }
    }

    private final Map<QueuePair, Entry> live = new ConcurrentHashMap<>();
    /** Where a check fails its queue pairs. */
    private final Executor failures;
    /** The ports that are down now; guarded by this, as are the fields below. */
    private final Map<Port, Outage> down = new HashMap<>();
    private long generations;
    /** Runs the checks; created at the first port-down: most fabrics never see one. */
    private ScheduledThreadPoolExecutor checker;
    private boolean closed;
    private volatile Consumer<DeviceEvent> srqLimitHook = e -> LOG.debug("{} (no SRQ limit hook set)", e);
    private volatile Consumer<DeviceEvent> portUpHook = e -> { };

    /** A router whose port-down checks fail their queue pairs on the check's own thread. */
    public DeviceEventRouter() {
        this(Runnable::run);
    }

    /**
     * A router whose port-down checks fail their queue pairs through {@code failures}: a fabric that delivers
     * connection events on one thread passes that thread's executor, so that a check's failures stay in order with
     * the connections' other events (a connection failed by the check, whose peer is on the same port, never hears
     * that peer's disconnect first). When it refuses (the fabric closes) they are failed on the check's thread.
     */
    public DeviceEventRouter(Executor failures) {
        this.failures = failures;
    }

    /**
     * Tracks {@code queuePair} on {@code device} and {@code port} until {@link #unregister}. {@code grace} is its
     * retry budget: how long it may ride out its port being down (a queue pair registered while its port is down
     * gets it from now).
     */
    public void register(QueuePair queuePair, String device, int port, Duration grace, QueuePairEvents events) {
        if (grace == null || grace.isNegative()) {
            throw new IllegalArgumentException("grace must be zero or positive, got " + grace);
        }
        Entry entry = new Entry(queuePair, device, port, grace, events);
        live.put(queuePair, entry);
        synchronized (this) {
            Port at = new Port(device, port);
            Outage outage = down.get(at);
            if (outage != null && outage.waiting.add(queuePair)) { // not already picked up by the port-down itself
                schedule(at, outage, Map.of(grace, List.of(queuePair)));
            }
        }
    }

    public void unregister(QueuePair queuePair) {
        live.remove(queuePair);
    }

    /** Receives {@link DeviceEvent.Kind#SRQ_LIMIT} events (a hook for shared receive queue users). */
    public void onSrqLimit(Consumer<DeviceEvent> hook) {
        srqLimitHook = hook == null ? e -> { } : hook;
    }

    /** Told of {@link DeviceEvent.Kind#PORT_UP} events (listeners waiting for their device retry at once). */
    public void onPortUp(Consumer<DeviceEvent> hook) {
        portUpHook = hook == null ? e -> { } : hook;
    }

    /** Handles one event; returns how many queue pairs it failed at once (a port-down fails none at once). */
    public int dispatch(DeviceEvent event) {
        switch (event.kind()) {
            case PORT_DOWN -> {
                portDown(event);
                return 0;
            }
            case DEVICE_FATAL -> {
                forgetOutages(event.device());
                int n = fail(e -> e.device.equals(event.device()), "RDMA device " + event.device()
                        + " failed (" + event.name() + ")");
                LOG.error("{}: failed {} connection(s) on it", event, n);
                return n;
            }
            case QUEUE_PAIR_ERROR -> {
                int n = fail(e -> e.device.equals(event.device()) && e.queuePair.qpNumber() == event.qpNumber(),
                        "queue pair " + event.qpNumber() + " on RDMA device " + event.device() + " went to error ("
                                + event.name() + ")");
                if (QUEUE_PAIR_FAILED.admit()) {
                    LOG.warn("{}: failed {} connection(s)", event, n);
                }
                return n;
            }
            case PORT_UP -> {
                portUp(event);
                portUpHook.accept(event);
                return 0;
            }
            case SRQ_LIMIT -> {
                srqLimitHook.accept(event);
                return 0;
            }
            default -> {
                LOG.debug("{}", event);
                return 0;
            }
        }
    }

    /** Fails every queue pair on {@code device} with {@code reason} (device removal); returns how many. */
    public int failDevice(String device, String reason) {
        forgetOutages(device);
        return fail(e -> e.device.equals(device), reason);
    }

    /** Stops the checks: the fabric closes, so nothing is left to fail. */
    @Override
    public synchronized void close() {
        closed = true;
        down.clear();
        if (checker != null) {
            checker.shutdownNow();
        }
    }

    /**
     * The port went down: each queue pair on it is checked once its grace is over. Another down event while the
     * port is down (without the up between) keeps the outage and its deadlines; only queue pairs not yet waiting
     * get a check.
     */
    private void portDown(DeviceEvent event) {
        Port port = new Port(event.device(), event.port());
        int waiting = 0;
        Duration longest = Duration.ZERO;
        synchronized (this) {
            if (closed) {
                LOG.debug("{} after the fabric closed: ignored", event);
                return;
            }
            Outage outage = down.get(port);
            if (outage == null) {
                outage = new Outage(++generations, event.name(), System.nanoTime());
                down.put(port, outage);
            }
            // one check per distinct grace (usually one per transport and side), not one per queue pair
            Map<Duration, List<QueuePair>> byGrace = new TreeMap<>();
            for (Entry e : live.values()) {
                if (e.device.equals(port.device) && e.port == port.port && outage.waiting.add(e.queuePair)) {
                    byGrace.computeIfAbsent(e.grace, g -> new ArrayList<>()).add(e.queuePair);
                }
            }
            schedule(port, outage, byGrace);
            for (QueuePair qp : outage.waiting) {
                Entry e = live.get(qp);
                if (e != null) {
                    waiting++;
                    longest = e.grace.compareTo(longest) > 0 ? e.grace : longest;
                }
            }
        }
        if (waiting == 0) {
            LOG.warn("{}: no connection on it", event);
        } else {
            LOG.warn("{}: {} connection(s) on it wait up to {} ms (the retry budget) for the port to come back",
                    event, waiting, longest.toMillis());
        }
    }

    /** Holds this. */
    private void schedule(Port port, Outage outage, Map<Duration, List<QueuePair>> byGrace) {
        if (closed) {
            return;
        }
        if (checker == null) {
            checker = new ScheduledThreadPoolExecutor(1, r -> {
                Thread t = new Thread(r, THREAD_NAME);
                t.setDaemon(true);
                return t;
            });
            checker.setRemoveOnCancelPolicy(true); // a cancelled check holds no queue pair until its time
        }
        long generation = outage.generation;
        byGrace.forEach((grace, batch) -> outage.checks.add(checker.schedule(
                () -> expire(port, generation, grace, batch), grace.toNanos(), TimeUnit.NANOSECONDS)));
    }

    /** A grace is over: the queue pairs of {@code batch} still waiting in that outage fail. */
    private void expire(Port port, long generation, Duration grace, List<QueuePair> batch) {
        List<Entry> hits = new ArrayList<>();
        String event;
        synchronized (this) {
            Outage outage = down.get(port);
            if (outage == null || outage.generation != generation) {
                return; // the port came back (and may have gone down again: that outage has checks of its own)
            }
            for (QueuePair qp : batch) {
                Entry e = live.get(qp);
                if (outage.waiting.remove(qp) && e != null) {
                    hits.add(e);
                }
            }
            event = outage.event;
        }
        if (hits.isEmpty()) {
            return;
        }
        String reason = "port " + port.port + " of RDMA device " + port.device + " went down (" + event
                + ") and stayed down for longer than the retry budget of " + grace.toMillis() + " ms";
        LOG.warn("{}: failing {} connection(s) on it", reason, hits.size());
        try {
            failures.execute(() -> failAll(hits, reason));
        } catch (RejectedExecutionException closing) {
            failAll(hits, reason);
        }
    }

    private void portUp(DeviceEvent event) {
        Outage outage;
        int rodeOut = 0;
        synchronized (this) {
            outage = down.remove(new Port(event.device(), event.port()));
            if (outage != null) {
                outage.checks.forEach(check -> check.cancel(false));
                for (QueuePair qp : outage.waiting) {
                    rodeOut += live.containsKey(qp) ? 1 : 0;
                }
            }
        }
        if (outage == null) {
            LOG.info("{}: the port is active", event);
        } else {
            LOG.info("port {} of RDMA device {} is active again after {} ms; {} connection(s) rode it out",
                    event.port(), event.device(), TimeUnit.NANOSECONDS.toMillis(System.nanoTime()
                            - outage.sinceNanos), rodeOut);
        }
    }

    /** The device failed or went: its connections fail now, so its ports' outages end without checks. */
    private synchronized void forgetOutages(String device) {
        down.entrySet().removeIf(o -> {
            if (!o.getKey().device.equals(device)) {
                return false;
            }
            o.getValue().checks.forEach(check -> check.cancel(false));
            return true;
        });
    }

    private int fail(Predicate<Entry> hit, String reason) {
        List<Entry> hits = new ArrayList<>();
        for (Entry e : live.values()) {
            if (hit.test(e)) {
                hits.add(e);
            }
        }
        failAll(hits, reason);
        return hits.size();
    }

    private static void failAll(List<Entry> hits, String reason) {
        for (Entry e : hits) {
            try {
                e.events.disconnected(e.queuePair, reason);
            } catch (RuntimeException ex) {
                if (FAILING_FAILED.admit()) { // per queue pair: a peer can put its own in error at will
                    LOG.error("failing {} ({}) failed", e.queuePair, reason, ex);
                }
            }
        }
    }
}
