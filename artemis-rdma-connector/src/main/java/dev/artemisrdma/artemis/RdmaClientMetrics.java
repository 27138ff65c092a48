package dev.artemisrdma.artemis;

import io.micrometer.core.instrument.MeterRegistry;

/**
 * Where RDMA clients publish their transport meters ({@code artemis.rdma.client.*}, tagged {@code factory}): one
 * set per connection factory, named by the connector parameter {@value RdmaParameters#METRICS_NAME} (default the
 * target's {@code host:port}), present from the factory's first connection on, for the life of the JVM: totals
 * survive closed connections and reconnects (the {@code connections} gauge falls back to 0).
 *
 * <p>By default they go to Micrometer's {@code Metrics.globalRegistry} when Micrometer is on the class path (add
 * your registry there, or call {@link #useRegistry}). A connector parameter cannot carry a registry (URLs and JNDI
 * hold strings only), hence this JVM-wide hook.
 */
public final class RdmaClientMetrics {

    private RdmaClientMetrics() {
    }

    /**
     * Clients publish into {@code registry} from now on (meters already published move there); {@code null}
     * publishes nothing.
     */
    public static void useRegistry(MeterRegistry registry) {
        ClientMetrics.useRegistry(registry);
    }

    /**
     * The counters of connection factory {@code metricsName} (null before its first connection): the same values as
     * its meters, without Micrometer.
     */
    public static RdmaTransportMetricsMXBean counters(String metricsName) {
        return ClientMetrics.counters(metricsName);
    }
}
