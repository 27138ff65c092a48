package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import io.micrometer.core.instrument.Metrics;
import jakarta.jms.Connection;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.config.MetricsConfiguration;
import org.apache.activemq.artemis.core.config.impl.ConfigurationImpl;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.spi.core.remoting.Acceptor;

/**
 * The transport's counters as an operator sees them: a broker with a Prometheus metrics plugin and JMX, an RDMA
 * acceptor, a JMS client publishing into its own Prometheus registry, traffic, then the acceptor stopped. Every
 * assertion fails if a counter stays at zero under traffic. Run on FakeFabric by MetricsTest and on the real rxe
 * fabric by the lab's MetricsLabTest.
 */
public final class MetricsScenario {

    public static final String BROKER = "metrics-broker";
    public static final String ACCEPTOR = "rdma-metrics";
    public static final String FACTORY = "metrics-client";
    private static final String DOMAIN = "org.apache.activemq.artemis";
    private static final int MESSAGES = 500;
    private static final int BODY = 2000;

    private final String host;
    private final int port;
    private final Path dataDir;
    /** Scrape excerpts, for README and for the lab's log. */
    private final List<String> report = new ArrayList<>();
    private String brokerScrape;
    private String clientScrape;

    public MetricsScenario(String host, int port, Path dataDir) {
        this.host = host;
        this.port = port;
        this.dataDir = dataDir;
    }

    public List<String> report() {
        return report;
    }

    /** Payload bytes the broker's acceptor and the client sent, as their meters said after the traffic. */
    public double bytesSent() {
        return value(brokerScrape, "artemis_rdma_sent_bytes_total", ACCEPTOR)
                + value(clientScrape, "artemis_rdma_client_sent_bytes_total", FACTORY);
    }

    public void run() throws Exception {
        PrometheusPlugin brokerMetrics = new PrometheusPlugin();
        PrometheusPlugin clientMetrics = new PrometheusPlugin();
        Configuration config = EmbeddedBroker.testable(new ConfigurationImpl(), dataDir)
                .setName(BROKER)
                .setJMXManagementEnabled(true)
                .setMetricsConfiguration(new MetricsConfiguration().setPlugin(brokerMetrics).setJvmMemory(false))
                .addAcceptorConfiguration(new TransportConfiguration(RdmaAcceptorFactory.class.getName(),
                        Map.of("host", host, "port", port), ACCEPTOR));
        MBeanServer jmx = ManagementFactory.getPlatformMBeanServer();
        ObjectName mbean = new ObjectName(DOMAIN + ":broker=\"" + BROKER + "\",component=acceptors,name=\""
                + ACCEPTOR + "\",subcomponent=rdma-transport");
        RdmaClientMetrics.useRegistry(clientMetrics.getRegistry());
        try (EmbeddedBroker broker = EmbeddedBroker.start(config, null)) {
            String before = brokerMetrics.scrape();
            assertEquals(0.0, value(before, "artemis_rdma_sent_bytes_total", ACCEPTOR), "a fresh acceptor sent nothing");
            assertTrue(jmx.isRegistered(mbean), "the acceptor's transport MBean " + mbean + " is registered");

            try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create("rdma://" + host + ":" + port
                    + "?metricsName=" + FACTORY)) {
                try (Connection connection = cf.createConnection()) {
                    traffic(connection);
                    RdmaTransportMetricsMXBean acceptor = ((RdmaAcceptor) broker.server().getRemotingService()
                            .getAcceptor(ACCEPTOR)).metrics();
                    assertTrue(acceptor.getConnections() >= 1, "an open connection is counted");
                    assertTrue((Integer) jmx.getAttribute(mbean, "Connections") >= 1, "JMX shows the connection");
                    assertTrue(acceptor.getRegisteredMemoryBytes() > 0, "an open connection has registered memory");
                    String during = brokerMetrics.scrape();
                    report.add(excerpt(during));
                    assertTrue(value(during, "artemis_rdma_connections", ACCEPTOR) >= 1, during);
                    assertTrue(value(during, "artemis_rdma_registered_memory_bytes", ACCEPTOR) > 0, during);
                    assertTrue(value(during, "artemis_rdma_send_pool_bytes", ACCEPTOR) > 0, during);
                    // the acceptor's connections take their receives from the loop's shared pool (the default)
                    assertTrue(value(during, "artemis_rdma_shared_receive_pool_bytes", ACCEPTOR) > 0, during);
                    assertTrue(value(during, "artemis_rdma_shared_receive_pools", ACCEPTOR) >= 1, during);
                    assertTrue(value(during, "artemis_rdma_loop_spin_budget_exhausted_total", ACCEPTOR) >= 0, during);
                    // the loop that carried the traffic, and the CPU its thread used
                    assertTrue(value(during, "artemis_rdma_loops", ACCEPTOR) >= 1, during);
                    assertTrue(value(during, "artemis_rdma_loop_blocks_total", ACCEPTOR) >= 1, during);
                    assertTrue(value(during, "artemis_rdma_loop_cpu_seconds_total", ACCEPTOR) > 0, during);
                    assertTrue(acceptor.getLoopCpuNanos() > 0, "the loop thread's CPU");
                }
            }
            RdmaTransportMetricsMXBean acceptor = ((RdmaAcceptor) broker.server().getRemotingService()
                    .getAcceptor(ACCEPTOR)).metrics();
            await(() -> acceptor.getConnections() == 0, "the closed connection leaves the connections gauge");
            String after = brokerMetrics.scrape();
            report.add(excerpt(after));
            String client = clientMetrics.scrape();
            report.add(clientExcerpt(client));
            assertEquals(0.0, value(client, "artemis_rdma_client_connections", FACTORY), "totals stay, connections go");
            assertEquals(value(client, "artemis_rdma_client_sent_bytes_total", FACTORY),
                    RdmaClientMetrics.counters(FACTORY).getBytesSent(), "the same counters without Micrometer");
            brokerScrape = after;
            clientScrape = client;
            checkTraffic(after, client);
            checkJmx(jmx, mbean, after);

            Acceptor rdma = broker.server().getRemotingService().getAcceptor(ACCEPTOR);
            rdma.stop();
            String stopped = brokerMetrics.scrape();
            assertFalse(stopped.contains("acceptor=\"" + ACCEPTOR + "\""), "meters removed on stop:\n" + stopped);
            assertFalse(jmx.isRegistered(mbean), "MBean unregistered on stop");
        } finally {
            RdmaClientMetrics.useRegistry(Metrics.globalRegistry);
        }
        assertTrue(clientMetrics.scrape().lines().noneMatch(l -> l.startsWith("artemis_rdma_client_")),
                "client meters move with useRegistry:\n" + clientMetrics.scrape());
    }

    /** MESSAGES persistent-size messages there and back over one connection. */
    private static void traffic(Connection connection) throws Exception {
        connection.start();
        Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = session.createQueue("metrics.queue");
        MessageProducer producer = session.createProducer(queue);
        MessageConsumer consumer = session.createConsumer(queue);
        byte[] body = new byte[BODY];
        for (int i = 0; i < MESSAGES; i++) {
            jakarta.jms.BytesMessage m = session.createBytesMessage();
            m.writeBytes(body);
            producer.send(m);
        }
        for (int i = 0; i < MESSAGES; i++) {
            assertNotNull(consumer.receive(10_000), "message " + i + " of " + MESSAGES);
        }
    }

    /** Broker and client counted the same traffic, and both saw at least what the messages carried. */
    private static void checkTraffic(String broker, String client) {
        double minBytes = (double) MESSAGES * BODY;
        double received = value(broker, "artemis_rdma_received_bytes_total", ACCEPTOR);
        double sent = value(broker, "artemis_rdma_sent_bytes_total", ACCEPTOR);
        assertTrue(received > minBytes, "broker received the messages' bytes: " + received);
        assertTrue(sent > minBytes, "broker sent the messages' bytes: " + sent);
        assertTrue(value(broker, "artemis_rdma_received_frames_total", ACCEPTOR) >= MESSAGES, broker);
        assertTrue(value(broker, "artemis_rdma_sent_frames_total", ACCEPTOR) >= MESSAGES, broker);
        assertTrue(value(broker, "artemis_rdma_completions_total", ACCEPTOR) >= MESSAGES, broker);
        assertEquals(1.0, value(broker, "artemis_rdma_connections_accepted_total", ACCEPTOR), broker);
        assertEquals(0.0, value(broker, "artemis_rdma_connections_refused_total", ACCEPTOR), broker);
        assertEquals(0.0, value(broker, "artemis_rdma_protocol_errors_total", ACCEPTOR), broker);
        assertEquals(0.0, value(broker, "artemis_rdma_rnr_retry_errors_total", ACCEPTOR), broker);
        assertEquals(0.0, value(broker, "artemis_rdma_completion_errors_total", ACCEPTOR), broker);
        assertEquals(0.0, value(broker, "artemis_rdma_registered_memory_bytes", ACCEPTOR), "released on close");
        // every frame one side sent, the other received: the two views of one connection agree exactly
        assertEquals(value(client, "artemis_rdma_client_sent_bytes_total", FACTORY), received, client);
        assertEquals(value(client, "artemis_rdma_client_received_bytes_total", FACTORY), sent, client);
        assertEquals(value(client, "artemis_rdma_client_sent_frames_total", FACTORY),
                value(broker, "artemis_rdma_received_frames_total", ACCEPTOR), client);
    }

    private static void checkJmx(MBeanServer jmx, ObjectName mbean, String scrape) throws Exception {
        assertEquals((long) value(scrape, "artemis_rdma_received_bytes_total", ACCEPTOR),
                (Long) jmx.getAttribute(mbean, "BytesReceived"), "JMX and Prometheus read the same counter");
        assertTrue((Long) jmx.getAttribute(mbean, "FramesSent") >= MESSAGES);
        assertTrue((Long) jmx.getAttribute(mbean, "Completions") >= MESSAGES);
        assertEquals(1L, jmx.getAttribute(mbean, "ConnectionsAccepted"));
    }

    /** The value of {@code metric} for the endpoint tagged {@code tagValue} in a scrape; fails when absent. */
    static double value(String scrape, String metric, String tagValue) {
        Pattern p = Pattern.compile("^" + Pattern.quote(metric) + "\\{([^}]*)\\} (\\S+)$", Pattern.MULTILINE);
        Matcher m = p.matcher(scrape);
        while (m.find()) {
            if (m.group(1).contains("=\"" + tagValue + "\"")) {
                return Double.parseDouble(m.group(2));
            }
        }
        throw new AssertionError(metric + " for " + tagValue + " is not in the scrape:\n" + scrape);
    }

    private static String excerpt(String scrape) {
        StringBuilder sb = new StringBuilder();
        scrape.lines().filter(l -> l.startsWith("artemis_rdma_") || l.startsWith("# HELP artemis_rdma_"))
                .forEach(l -> sb.append(l).append('\n'));
        return sb.toString();
    }

    private static String clientExcerpt(String scrape) {
        StringBuilder sb = new StringBuilder();
        scrape.lines().filter(l -> l.startsWith("artemis_rdma_client_")).forEach(l -> sb.append(l).append('\n'));
        return sb.toString();
    }

    private static void await(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("not within 10 s: " + what);
            }
            Thread.sleep(20);
        }
    }
}
