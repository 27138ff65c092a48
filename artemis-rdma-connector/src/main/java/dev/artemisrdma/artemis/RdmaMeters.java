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
 *
 * <p>Threads: its owner registers and closes it, one thread at a time, so it has no lock of its own: an acceptor's
 * {@link AcceptorMonitoring} when the acceptor starts and stops, {@link ClientMetrics} under its class lock. The
 * meters read their source on whatever thread scrapes the registry; {@link EndpointMetrics} guards that itself.
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

    /** One meter: a counter (only grows) or a gauge, what it reads, and whether clients have it too. */
    private record Spec(String name, String unit, boolean gauge, boolean acceptorOnly, String description,
                        ToDoubleFunction<RdmaTransportMetricsMXBean> value) {
    }

    private static final String BYTES = "bytes";
    private static final String SECONDS = "seconds";
    private static final List<Spec> SPECS = List.of(
        new Spec("sent.bytes", BYTES, false, false, "payload bytes sent", RdmaTransportMetricsMXBean::getBytesSent),
        new Spec("received.bytes", BYTES, false, false, "payload bytes received",
                RdmaTransportMetricsMXBean::getBytesReceived),
        new Spec("sent.frames", null, false, false, "frames (Core packets) sent",
                RdmaTransportMetricsMXBean::getFramesSent),
        new Spec("received.frames", null, false, false, "whole frames received",
                RdmaTransportMetricsMXBean::getFramesReceived),
        new Spec("sent.frames.packed", null, false, false, "frames sent packed with others into one SEND",
                RdmaTransportMetricsMXBean::getFramesPacked),
        new Spec("sent.fragments.immediate", null, false, false, "fragments sent with their header in immediate data",
                RdmaTransportMetricsMXBean::getImmediateFragmentsSent),
        new Spec("connections.older.peers", null, true, false,
                "open connections whose peer states fewer wire features than this build (an older artemis-rdma)",
                RdmaTransportMetricsMXBean::getOlderPeerConnections),
        new Spec("completions", null, false, false, "work completions polled",
                RdmaTransportMetricsMXBean::getCompletions),
        new Spec("credit.stalls", null, false, false, "sends that waited for receive credit from the peer",
                RdmaTransportMetricsMXBean::getCreditStalls),
        new Spec("rnr.retry.errors", null, false, false, "work requests failed with IBV_WC_RNR_RETRY_EXC_ERR",
                RdmaTransportMetricsMXBean::getRnrRetryErrors),
        new Spec("retry.errors", null, false, false, "work requests failed with IBV_WC_RETRY_EXC_ERR",
                RdmaTransportMetricsMXBean::getRetryErrors),
        new Spec("completion.errors", null, false, false, "work requests failed with another status (not flushes)",
                RdmaTransportMetricsMXBean::getCompletionErrors),
        new Spec("protocol.errors", null, false, false, "peers that broke the wire protocol",
                RdmaTransportMetricsMXBean::getProtocolErrors),
        new Spec("connections", null, true, false, "connections open now",
                RdmaTransportMetricsMXBean::getConnections),
        new Spec("connections.accepted", null, false, true, "connection requests accepted",
                RdmaTransportMetricsMXBean::getConnectionsAccepted),
        new Spec("connections.refused", null, false, true, "connection requests refused",
                RdmaTransportMetricsMXBean::getConnectionsRefused),
        new Spec("registered.memory.bytes", BYTES, true, false, "memory the connections registered with the device",
                RdmaTransportMetricsMXBean::getRegisteredMemoryBytes),
        new Spec("send.pool.bytes", BYTES, true, false, "memory registered by the shared send buffer pool",
                RdmaTransportMetricsMXBean::getSendPoolBytes),
        new Spec("shared.receive.pool.bytes", BYTES, true, false,
                "memory registered by the shared receive pools of the completion loops",
                RdmaTransportMetricsMXBean::getSharedReceivePoolBytes),
        new Spec("shared.receive.pools", null, true, false, "shared receive pools in service",
                RdmaTransportMetricsMXBean::getSharedReceivePools),
        new Spec("shared.receive.credits.recalled", null, false, false,
                "receive credits idle connections gave back to a shared receive pool that recalled them",
                RdmaTransportMetricsMXBean::getSharedReceiveCreditsRecalled),
        new Spec("shared.receive.recalls", null, false, false,
                "recalls the shared receive pools made of credits beyond the minimum in grown windows",
                RdmaTransportMetricsMXBean::getSharedReceiveRecalls),
        new Spec("loop.spin.budget.exhausted", null, false, false,
                "periods of 100 ms in which the loops used up their spin budget (one core's worth)",
                RdmaTransportMetricsMXBean::getLoopSpinBudgetExhausted),
        new Spec("loops", null, true, false, "completion loop threads of the transport",
                RdmaTransportMetricsMXBean::getLoops),
        new Spec("loop.spins", null, false, false, "idle periods in which a completion loop busy-polled",
                RdmaTransportMetricsMXBean::getLoopSpins),
        new Spec("loop.spin.hits", null, false, false, "busy-polls that found a completion (a wake-up saved)",
                RdmaTransportMetricsMXBean::getLoopSpinHits),
        new Spec("loop.spin", SECONDS, false, false, "time completion loops spent busy-polling while idle",
                m -> m.getLoopSpinNanos() / 1e9),
        new Spec("loop.blocks", null, false, false, "times a completion loop blocked on its completion channel",
                RdmaTransportMetricsMXBean::getLoopBlocks),
        new Spec("loop.wakeups", null, false, false, "blocked completion loops woken by a completion",
                RdmaTransportMetricsMXBean::getLoopWakeUps),
        new Spec("loop.blocked", SECONDS, false, false, "time completion loops spent blocked",
                m -> m.getLoopBlockedNanos() / 1e9),
        new Spec("loop.cpu", SECONDS, false, false, "CPU time of the completion loop threads",
                m -> Math.max(0, m.getLoopCpuNanos()) / 1e9));

    /**
     * Registers the meters of {@code source} in {@code registry} (a {@code MeterRegistry}, typed Object so that
     * callers need no Micrometer), named {@code prefix + ...} and tagged {@code tags} (key, value, ...); the
     * acceptor-only ones when {@code acceptor}.
     */
    static RdmaMeters register(Object registry, String prefix, RdmaTransportMetricsMXBean source, boolean acceptor,
                               String... tags) {
        RdmaMeters m = new RdmaMeters((MeterRegistry) registry);
        Tags t = Tags.of(tags);
        try {
            for (Spec spec : SPECS) {
                if (!spec.acceptorOnly() || acceptor) {
                    m.meters.add(m.register(prefix + spec.name(), spec, source, t));
                }
            }
        } catch (RuntimeException e) {
            m.close(); // all or nothing
            throw e;
        }
        return m;
    }

    private Meter register(String name, Spec spec, RdmaTransportMetricsMXBean source, Tags tags) {
        return spec.gauge()
                ? Gauge.builder(name, source, spec.value()).baseUnit(spec.unit()).description(spec.description())
                        .tags(tags).strongReference(true).register(registry)
                : FunctionCounter.builder(name, source, spec.value()).baseUnit(spec.unit())
                        .description(spec.description()).tags(tags).register(registry);
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
