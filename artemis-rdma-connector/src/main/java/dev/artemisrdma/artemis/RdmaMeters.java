package dev.artemisrdma.artemis;

import java.util.ArrayList;
import java.util.List;
import java.util.function.ToDoubleFunction;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Metrics;
import io.micrometer.core.instrument.Tags;

/**
 * The Micrometer meters of one endpoint, read from its {@link RdmaTransportMetricsMXBean} when the registry is
 * scraped (nothing is counted twice, nothing is pushed). The only class that touches Micrometer: it is loaded only
 * when a registry is in use, so the connector runs without Micrometer on the class path.
 */
final class RdmaMeters implements AutoCloseable {

    /** Prefix of the broker's meters (tags {@code broker}, {@code acceptor}). */
    static final String ACCEPTOR_PREFIX = "artemis.rdma.";
    /** Prefix of the client meters (tag {@code factory}): a family of its own, so both can share a registry. */
    static final String CLIENT_PREFIX = "artemis.rdma.client.";

    private final MeterRegistry registry;
    private final List<Meter> meters = new ArrayList<>();

    private RdmaMeters(MeterRegistry registry) {
        this.registry = registry;
    }

    /** Micrometer's global registry (what clients publish into unless told otherwise). */
    static Object globalRegistry() {
        return Metrics.globalRegistry;
    }

    /**
     * Registers the meters of {@code source} in {@code registry} (a {@code MeterRegistry}, typed Object so that
     * callers need no Micrometer), named {@code prefix + ...} and tagged {@code tags} (key, value, ...).
     */
    static RdmaMeters register(Object registry, String prefix, RdmaTransportMetricsMXBean source, boolean server,
                               String... tags) {
        RdmaMeters m = new RdmaMeters((MeterRegistry) registry);
        Tags t = Tags.of(tags);
        m.counter(prefix + "sent.bytes", "bytes", "payload bytes sent", source, RdmaTransportMetricsMXBean::getBytesSent, t);
        m.counter(prefix + "received.bytes", "bytes", "payload bytes received", source,
                RdmaTransportMetricsMXBean::getBytesReceived, t);
        m.counter(prefix + "sent.frames", null, "frames (Core packets) sent", source,
                RdmaTransportMetricsMXBean::getFramesSent, t);
        m.counter(prefix + "received.frames", null, "whole frames received", source,
                RdmaTransportMetricsMXBean::getFramesReceived, t);
        m.counter(prefix + "completions", null, "work completions polled", source,
                RdmaTransportMetricsMXBean::getCompletions, t);
        m.counter(prefix + "credit.stalls", null, "sends that waited for receive credit from the peer", source,
                RdmaTransportMetricsMXBean::getCreditStalls, t);
        m.counter(prefix + "rnr.retry.errors", null, "work requests failed with IBV_WC_RNR_RETRY_EXC_ERR", source,
                RdmaTransportMetricsMXBean::getRnrRetryErrors, t);
        m.counter(prefix + "retry.errors", null, "work requests failed with IBV_WC_RETRY_EXC_ERR", source,
                RdmaTransportMetricsMXBean::getRetryErrors, t);
        m.counter(prefix + "completion.errors", null, "work requests failed with another status (not flushes)",
                source, RdmaTransportMetricsMXBean::getCompletionErrors, t);
        m.counter(prefix + "protocol.errors", null, "peers that broke the wire protocol", source,
                RdmaTransportMetricsMXBean::getProtocolErrors, t);
        m.gauge(prefix + "connections", null, "connections open now", source,
                RdmaTransportMetricsMXBean::getConnections, t);
        if (server) {
            m.counter(prefix + "connections.accepted", null, "connection requests accepted", source,
                    RdmaTransportMetricsMXBean::getConnectionsAccepted, t);
            m.counter(prefix + "connections.refused", null, "connection requests refused", source,
                    RdmaTransportMetricsMXBean::getConnectionsRefused, t);
        }
        m.gauge(prefix + "registered.memory.bytes", "bytes", "memory the connections registered with the device", source,
                RdmaTransportMetricsMXBean::getRegisteredMemoryBytes, t);
        m.gauge(prefix + "send.pool.bytes", "bytes", "memory registered by the shared send buffer pool", source,
                RdmaTransportMetricsMXBean::getSendPoolBytes, t);
        return m;
    }

    private void counter(String name, String unit, String description, RdmaTransportMetricsMXBean source,
                         ToDoubleFunction<RdmaTransportMetricsMXBean> value, Tags tags) {
        meters.add(FunctionCounter.builder(name, source, value).baseUnit(unit).description(description).tags(tags)
                .register(registry));
    }

    private void gauge(String name, String unit, String description, RdmaTransportMetricsMXBean source,
                       ToDoubleFunction<RdmaTransportMetricsMXBean> value, Tags tags) {
        meters.add(Gauge.builder(name, source, value).baseUnit(unit).description(description).tags(tags)
                .strongReference(true).register(registry));
    }

    /** Removes every meter registered here. */
    @Override
    public void close() {
        for (Meter meter : meters) {
            registry.remove(meter);
        }
        meters.clear();
    }
}
