package dev.artemisrdma.transport.fabric;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * Maps device events onto the queue pairs they hit, for fabric implementations: a port going down fails every
 * queue pair on that device and port, a fatal device error every queue pair on the device, a queue pair error that
 * one queue pair; each hears {@link QueuePairEvents#disconnected} with a reason naming the device, the port or queue
 * pair, and the event, so Artemis fails the connection over at once instead of waiting for retries or pings.
 *
 * <p>The fabric registers each queue pair with its device and port while it lives. Thread-safe; events are handled
 * on the caller's thread (the fabric's event thread).
 */
public final class DeviceEventRouter {

    private static final Logger LOG = LoggerFactory.getLogger(DeviceEventRouter.class);
    /** A peer can make its queue pairs fail at will (QP_REQ_ERR, QP_ACCESS_ERR): limited, summarised. */
    private static final LogLimiter QUEUE_PAIR_FAILED = LogLimiter.site(LOG, Level.WARN,
            "queue pairs that went to error");

    private record Entry(QueuePair queuePair, String device, int port, QueuePairEvents events) {
    }

    private final Map<QueuePair, Entry> live = new ConcurrentHashMap<>();
    private volatile Consumer<DeviceEvent> srqLimitHook = e -> LOG.debug("{} (no SRQ limit hook set)", e);
    private volatile Consumer<DeviceEvent> portUpHook = e -> { };

    public void register(QueuePair queuePair, String device, int port, QueuePairEvents events) {
        live.put(queuePair, new Entry(queuePair, device, port, events));
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

    /** Handles one event; returns how many queue pairs it failed. */
    public int dispatch(DeviceEvent event) {
        switch (event.kind()) {
            case PORT_DOWN -> {
                int n = fail(e -> e.device.equals(event.device()) && e.port == event.port(),
                        "port " + event.port() + " of RDMA device " + event.device() + " went down ("
                                + event.name() + ")");
                LOG.warn("{}: failed {} connection(s) on it", event, n);
                return n;
            }
            case DEVICE_FATAL -> {
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
                LOG.info("{}: the port is active", event);
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
        return fail(e -> e.device.equals(device), reason);
    }

    private int fail(java.util.function.Predicate<Entry> hit, String reason) {
        List<Entry> hits = new ArrayList<>();
        for (Entry e : live.values()) {
            if (hit.test(e)) {
                hits.add(e);
            }
        }
        for (Entry e : hits) {
            try {
                e.events.disconnected(e.queuePair, reason);
            } catch (RuntimeException ex) {
                LOG.error("failing {} ({}) failed", e.queuePair, reason, ex);
            }
        }
        return hits.size();
    }
}
