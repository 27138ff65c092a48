package dev.artemisrdma.artemis;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.config.FileDeploymentManager;
import org.apache.activemq.artemis.core.config.impl.ConfigurationImpl;
import org.apache.activemq.artemis.core.config.impl.FileConfiguration;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.impl.ActiveMQServerImpl;
import org.apache.activemq.artemis.spi.core.security.ActiveMQJAASSecurityManager;

/**
 * A broker started from the project's {@code config/} files, as a user would configure it. The RDMA endpoint comes
 * from the files' {@code ${rdma.host}}/{@code ${rdma.port}} substitutions; persistence is switched off and data
 * directories point into {@code dataDir} so tests stay fast and independent.
 */
final class EmbeddedBroker implements AutoCloseable {

    private final ActiveMQServer server;

    private EmbeddedBroker(ActiveMQServer server) {
        this.server = server;
    }

    /** The repository's {@code config/} folder (searched upwards from the working directory). */
    static Path configDir() {
        Path dir = Path.of(System.getProperty("user.dir")).toAbsolutePath();
        while (dir != null) {
            if (Files.isRegularFile(dir.resolve("config/broker.xml"))) {
                return dir.resolve("config");
            }
            dir = dir.getParent();
        }
        throw new IllegalStateException("no config/broker.xml above " + System.getProperty("user.dir"));
    }

    /** Starts a broker from {@code config/broker.xml} (the RdmaAcceptorPlugin path). */
    static EmbeddedBroker fromBrokerXml(Path dataDir, String host, int port) throws Exception {
        return withEndpoint(host, port, () -> start(testable(read("broker.xml"), dataDir), null));
    }

    /**
     * Reads {@code config/FILE} with the given system properties set for its {@code ${...}} substitutions; the
     * caller adjusts the configuration and starts it.
     */
    static FileConfiguration read(String file, Map<String, String> substitutions) throws Exception {
        synchronized (EmbeddedBroker.class) {
            substitutions.forEach(System::setProperty);
            try {
                return read(file);
            } finally {
                substitutions.keySet().forEach(System::clearProperty);
            }
        }
    }

    private static FileConfiguration read(String file) throws Exception {
        FileDeploymentManager deployment = new FileDeploymentManager(configDir().resolve(file).toUri().toString());
        FileConfiguration config = new FileConfiguration();
        deployment.addDeployable(config);
        deployment.readConfiguration();
        return config;
    }

    /** Starts a default broker with {@code config/broker.properties} applied (the factoryClassName path). */
    static EmbeddedBroker fromBrokerProperties(Path dataDir, String host, int port) throws Exception {
        return withEndpoint(host, port, () -> {
            Configuration config = new ConfigurationImpl().setSecurityEnabled(false);
            return start(testable(config, dataDir), configDir().resolve("broker.properties").toString());
        });
    }

    /** Starts a broker with the given configuration as is (for tests of refused configurations). */
    static EmbeddedBroker start(Configuration config, String brokerProperties) throws Exception {
        ActiveMQServer server = new ActiveMQServerImpl(config, new ActiveMQJAASSecurityManager());
        if (brokerProperties != null) {
            server.setProperties(brokerProperties);
        }
        server.start();
        return new EmbeddedBroker(server);
    }

    static Configuration testable(Configuration config, Path dataDir) {
        config.setBrokerInstance(dataDir.toFile());
        return config.setPersistenceEnabled(false)
                .setJMXManagementEnabled(false)
                .setSecurityEnabled(false)
                .setJournalDirectory(dataDir.resolve("journal").toString())
                .setBindingsDirectory(dataDir.resolve("bindings").toString())
                .setPagingDirectory(dataDir.resolve("paging").toString())
                .setLargeMessagesDirectory(dataDir.resolve("large-messages").toString());
    }

    interface Starter {
        EmbeddedBroker start() throws Exception;
    }

    private static synchronized EmbeddedBroker withEndpoint(String host, int port, Starter starter)
            throws Exception {
        System.setProperty("rdma.host", host);
        System.setProperty("rdma.port", Integer.toString(port));
        try {
            return starter.start();
        } finally {
            System.clearProperty("rdma.host");
            System.clearProperty("rdma.port");
        }
    }

    ActiveMQServer server() {
        return server;
    }

    @Override
    public void close() throws Exception {
        server.stop();
    }
}
