package dev.artemisrdma.it.compat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;

import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.config.MetricsConfiguration;
import org.apache.activemq.artemis.core.config.impl.ConfigurationImpl;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.impl.ActiveMQServerImpl;
import org.apache.activemq.artemis.core.server.metrics.plugins.SimpleMetricsPlugin;
import org.apache.activemq.artemis.spi.core.security.ActiveMQJAASSecurityManager;

/**
 * A persistent broker with one RDMA acceptor, made from Artemis's API and the factory's class name only, so that
 * it runs on whichever connector jar its class path carries (an old build's, or this one's). With a metrics plugin,
 * so that a build that has the wire-feature meters publishes them. Driven by lines: {@code report} answers
 * {@value #REPORT}, the Artemis release it runs on and the {@link CompatMeters} of the acceptor; {@code stop} stops
 * the broker and exits.
 *
 * <p>Arguments: host, port, data directory.
 */
public final class CompatBrokerMain {

    static final String READY = "COMPAT BROKER READY";
    static final String REPORT = "COMPAT BROKER REPORT ";
    private static final String ACCEPTOR_FACTORY = "dev.artemisrdma.artemis.RdmaAcceptorFactory";

    private CompatBrokerMain() {
    }

    public static void main(String[] args) throws Exception {
        Path data = Path.of(args[2]);
        Configuration config = new ConfigurationImpl().setPersistenceEnabled(true).setSecurityEnabled(false)
                .setJMXManagementEnabled(false)
                .setJournalDirectory(data.resolve("journal").toString())
                .setBindingsDirectory(data.resolve("bindings").toString())
                .setPagingDirectory(data.resolve("paging").toString())
                .setLargeMessagesDirectory(data.resolve("large-messages").toString())
                .setMetricsConfiguration(new MetricsConfiguration().setPlugin(new SimpleMetricsPlugin().init(Map.of()))
                        .setJvmMemory(false));
        config.addAcceptorConfiguration(new TransportConfiguration(ACCEPTOR_FACTORY,
                CompatParams.with(Map.of("host", args[0], "port", Integer.parseInt(args[1]), "protocols", "CORE")),
                "rdma"));
        ActiveMQServer server = new ActiveMQServerImpl(config, new ActiveMQJAASSecurityManager());
        server.start();
        if (!server.isActive()) {
            System.out.println("FAILED the broker did not become active");
            System.exit(1);
        }
        System.out.println(READY);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String command;
        while ((command = in.readLine()) != null) {
            if (command.equals("report")) {
                try {
                    System.out.println(REPORT + "artemis=" + server.getVersion().getFullVersion() + " "
                            + CompatMeters.report(server.getMetricsManager().getMeterRegistry(), "artemis.rdma."));
                } catch (RuntimeException e) {
                    System.out.println("FAILED the report: " + e); // the test fails at once, with this
                }
            } else if (command.equals("stop")) {
                break;
            }
        }
        server.stop();
        System.exit(0);
    }
}
