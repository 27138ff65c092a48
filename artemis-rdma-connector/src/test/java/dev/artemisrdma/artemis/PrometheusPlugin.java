package dev.artemisrdma.artemis;

import java.util.Map;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import org.apache.activemq.artemis.core.server.metrics.ActiveMQMetricsPlugin;

/** A broker metrics plugin backed by Micrometer's Prometheus registry, as artemis-prometheus-metrics-plugin is. */
public final class PrometheusPlugin implements ActiveMQMetricsPlugin {

    private static final long serialVersionUID = 1L;
    private final transient PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);

    @Override
    public ActiveMQMetricsPlugin init(Map<String, String> options) {
        return this;
    }

    @Override
    public MeterRegistry getRegistry() {
        return registry;
    }

    /** What a Prometheus server reads at /metrics. */
    public String scrape() {
        return registry.scrape();
    }
}
