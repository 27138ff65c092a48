package dev.artemisrdma.artemis;

import java.lang.invoke.MethodHandles;
import java.util.HashMap;
import java.util.Map;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The client side's meter groups: one per connection factory (per {@value RdmaParameters#METRICS_NAME}, default the
 * target's {@code host:port}), shared by every connector of that factory. A group stays published for the life of
 * the JVM once its first connector started: Artemis makes a connector per JMS connection and per reconnect, and
 * counters that vanished and restarted with them would read as resets; a closed connection only leaves its totals.
 * Free of Micrometer types: {@link RdmaMeters} is loaded only when a registry is in use.
 */
final class ClientMetrics {

    private static final Logger logger = LoggerFactory.getLogger(MethodHandles.lookup().lookupClass());
    private static final Object LOCK = new Object();
    private static final boolean MICROMETER = micrometerPresent();
    private static final Map<String, Group> groups = new HashMap<>();
    /** A MeterRegistry, or null: publish nothing. */
    private static Object registry = MICROMETER ? RdmaMeters.globalRegistry() : null;

    private ClientMetrics() {
    }

    /** The counters of one client connection factory. */
    static final class Group {
        private final String name;
        private final EndpointMetrics metrics;
        /** The transport of the latest connector: whose send pool the group reports. */
        private volatile ChannelTransport transport;
        private RdmaMeters meters;

        private Group(String name) {
            this.name = name;
            this.metrics = new EndpointMetrics(() -> transport);
        }

        EndpointMetrics metrics() {
            return metrics;
        }

        private void publish() {
            if (registry == null) {
                return;
            }
            try {
                meters = RdmaMeters.register(registry, RdmaMeters.CLIENT_PREFIX, metrics, false, "factory", name);
            } catch (RuntimeException e) {
                // a registry may refuse a meter (e.g. a name clash); the connection must not fail for it
                logger.warn("RDMA client meters of '{}' not published: {}", name, e.toString());
            }
        }
    }

    /** A connector of factory {@code name} started on {@code transport}. */
    static Group join(String name, ChannelTransport transport) {
        synchronized (LOCK) {
            Group group = groups.get(name);
            if (group == null) {
                group = new Group(name);
                group.transport = transport;
                group.publish();
                groups.put(name, group);
            }
            group.transport = transport;
            return group;
        }
    }

    /** Where client meters go from now on (null: nowhere); groups already published move there. */
    static void useRegistry(Object newRegistry) {
        if (newRegistry != null && !MICROMETER) {
            throw new IllegalStateException("Micrometer (io.micrometer:micrometer-core) is not on the class path");
        }
        synchronized (LOCK) {
            for (Group group : groups.values()) {
                unpublish(group);
            }
            registry = newRegistry;
            for (Group group : groups.values()) {
                group.publish();
            }
        }
    }

    /** The counters of the connection factory {@code name} since its first connection, or null if none yet. */
    static RdmaTransportMetricsMXBean counters(String name) {
        synchronized (LOCK) {
            Group group = groups.get(name);
            return group == null ? null : group.metrics;
        }
    }

    private static void unpublish(Group group) {
        if (group.meters != null) {
            group.meters.close();
            group.meters = null;
        }
    }

    private static boolean micrometerPresent() {
        try {
            Class.forName("io.micrometer.core.instrument.MeterRegistry", false, ClientMetrics.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            logger.debug("Micrometer is not on the class path: RDMA clients publish no meters");
            return false;
        }
    }
}
