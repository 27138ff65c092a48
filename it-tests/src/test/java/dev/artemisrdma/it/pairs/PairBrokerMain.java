package dev.artemisrdma.it.pairs;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;

import dev.artemisrdma.artemis.LinkReport;
import dev.artemisrdma.it.artemis.LabBroker;
import org.apache.activemq.artemis.core.config.FileDeploymentManager;
import org.apache.activemq.artemis.core.config.impl.FileConfiguration;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.impl.ActiveMQServerImpl;
import org.apache.activemq.artemis.spi.core.security.ActiveMQJAASSecurityManager;

/**
 * One broker of a pair, from a file of {@code config/pairs/}, in a process of its own so that a test can SIGKILL it.
 * Arguments: {@code FILE DATA_DIR [tcp] [properties=FILE] [property:KEY=VALUE...] [NAME=VALUE...]}: the values feed
 * the file's {@code ${NAME}} substitutions; {@code properties=} applies broker properties, and each
 * {@code property:} one more after the file's (e.g. {@code property:acceptorConfigurations.rdma.params.sslEnabled=true});
 * {@code tcp} drops the broker plugins and the properties, so every link stays on Netty TCP (the comparison runs).
 * Prints
 * {@value #READY} once started (active or, for a backup, waiting for its primary), then answers commands on stdin:
 * {@code report} prints {@value #REPORT} and a {@link LinkReport} line; {@code stop} stops the broker and exits.
 */
public final class PairBrokerMain {

    public static final String READY = "PAIR BROKER READY";
    /** Printed before {@link #READY} with where the connector's classes come from (this build's or an older jar). */
    public static final String CONNECTOR = "PAIR BROKER CONNECTOR ";
    public static final String REPORT = "PAIR REPORT ";
    /** Argument prefix naming a broker.properties file of {@code config/pairs/} to apply (not with {@code tcp}). */
    public static final String PROPERTIES = "properties=";
    /** Argument prefix of one broker property ({@code property:KEY=VALUE}), applied after {@link #PROPERTIES}' file. */
    public static final String PROPERTY = "property:";

    private PairBrokerMain() {
    }

    public static void main(String[] args) throws Exception {
        String file = args[0];
        Path data = Path.of(args[1]);
        boolean tcp = false;
        String brokerProperties = null;
        java.util.Properties more = new java.util.Properties();
        for (int i = 2; i < args.length; i++) {
            if (args[i].equals("tcp")) {
                tcp = true;
            } else if (args[i].startsWith(PROPERTIES)) {
                brokerProperties = args[i].substring(PROPERTIES.length());
            } else if (args[i].startsWith(PROPERTY)) {
                int eq = args[i].indexOf('=');
                more.setProperty(args[i].substring(PROPERTY.length(), eq), args[i].substring(eq + 1));
            } else {
                int eq = args[i].indexOf('=');
                System.setProperty(args[i].substring(0, eq), args[i].substring(eq + 1));
            }
        }
        FileDeploymentManager deployment = new FileDeploymentManager(
                LabBroker.configDir().resolve("pairs").resolve(file).toUri().toString());
        FileConfiguration config = new FileConfiguration();
        deployment.addDeployable(config);
        deployment.readConfiguration();
        LabBroker.writable(config, data, true);
        if (tcp) {
            new ArrayList<>(config.getBrokerPlugins()).forEach(config::unRegisterBrokerPlugin);
        }
        ActiveMQServer server = new ActiveMQServerImpl(config, new ActiveMQJAASSecurityManager());
        if ((brokerProperties != null || !more.isEmpty()) && !tcp) {
            server.setProperties(brokerProperties(brokerProperties, more).toString());
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> stop(server)));
        server.start();
        System.out.println(CONNECTOR + dev.artemisrdma.artemis.RdmaAcceptorFactory.class.getProtectionDomain()
                .getCodeSource().getLocation());
        System.out.println(READY);
        System.out.flush();
        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String command;
        while ((command = commands.readLine()) != null) {
            if (command.equals("report")) {
                System.out.println(REPORT + LinkReport.of(server, config.getClusterUser()));
                System.out.flush();
            } else if (command.equals("stop")) {
                break;
            }
        }
        stop(server);
        System.exit(0);
    }

    /**
     * The file of broker properties to apply: {@code config/pairs/FILE} itself, or, with {@code more}, a copy of it
     * (none: an empty one) with {@code more} written after its own lines, in a temporary file.
     */
    private static Path brokerProperties(String file, java.util.Properties more) throws java.io.IOException {
        Path named = file == null ? null : LabBroker.configDir().resolve("pairs").resolve(file);
        if (more.isEmpty()) {
            return named;
        }
        java.io.StringWriter text = new java.io.StringWriter();
        if (named != null) {
            text.write(java.nio.file.Files.readString(named));
            text.write(System.lineSeparator());
        }
        more.store(text, "property: arguments of PairBrokerMain"); // escaped as Properties.load reads them back
        Path merged = java.nio.file.Files.createTempFile("pair-broker", ".properties");
        java.nio.file.Files.writeString(merged, text.toString());
        merged.toFile().deleteOnExit();
        return merged;
    }

    private static void stop(ActiveMQServer server) {
        try {
            server.stop();
        } catch (Exception ignored) {
            // exiting
        }
    }
}
