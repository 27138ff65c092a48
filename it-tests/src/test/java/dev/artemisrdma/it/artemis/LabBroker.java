package dev.artemisrdma.it.artemis;

import dev.artemisrdma.artemis.RdmaAcceptorFactory;

import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.config.FileDeploymentManager;
import org.apache.activemq.artemis.core.config.impl.FileConfiguration;
import org.apache.activemq.artemis.core.remoting.impl.netty.NettyAcceptorFactory;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.impl.ActiveMQServerImpl;
import org.apache.activemq.artemis.spi.core.security.ActiveMQJAASSecurityManager;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

/**
 * A broker started from the project's {@code config/broker.xml}, exactly as a user configures it (the RDMA
 * acceptor comes from the broker plugin declared there), with its data directories moved somewhere writable.
 */
public final class LabBroker implements AutoCloseable {

    private final ActiveMQServer server;

    private LabBroker(ActiveMQServer server) {
        this.server = server;
    }

    public static Path configDir() {
        Path dir = Path.of(System.getProperty("user.dir")).toAbsolutePath();
        while (dir != null) {
            if (Files.isRegularFile(dir.resolve("config/broker.xml"))) {
                return dir.resolve("config");
            }
            dir = dir.getParent();
        }
        throw new IllegalStateException("no config/broker.xml above " + System.getProperty("user.dir"));
    }

    /**
     * Starts {@code config/broker.xml} with {@code ${rdma.host}}/{@code ${rdma.port}} set to the given endpoint.
     * With {@code tcpPort > 0} a Netty TCP acceptor is added on the same host, for side-by-side comparisons.
     */
    public static LabBroker start(String host, int port, Path dataDir, boolean persistent, int tcpPort)
            throws Exception {
        return start(host, port, dataDir, persistent, tcpPort, Map.of());
    }

    /** As above, with {@code rdmaParams} added to the RDMA acceptor's parameters (transport keys, e.g. for a benchmark). */
    public static LabBroker start(String host, int port, Path dataDir, boolean persistent, int tcpPort,
                                  Map<String, String> rdmaParams) throws Exception {
        return start(host, port, dataDir, persistent, tcpPort, rdmaParams, Map.of());
    }

    /**
     * As above, with more RDMA acceptors: each named one is a copy of the configured RDMA acceptor with the given
     * parameters changed (a port, at least), made with {@code RdmaAcceptorFactory} itself: broker.xml's plugin
     * switches only the acceptors it names, and would leave a copy under another name on Netty TCP.
     */
    public static LabBroker start(String host, int port, Path dataDir, boolean persistent, int tcpPort,
                                  Map<String, String> rdmaParams,
                                  Map<String, Map<String, String>> moreRdmaAcceptors) throws Exception {
        return start(host, port, dataDir, persistent, tcpPort, rdmaParams, moreRdmaAcceptors, Map.of());
    }

    /**
     * As above, with more Netty TCP acceptors on the same host: each named one with the given parameters (a port, at
     * least; TLS keys for a Netty TLS acceptor), for comparisons with Artemis's own transport.
     */
    public static synchronized LabBroker start(String host, int port, Path dataDir, boolean persistent, int tcpPort,
                                               Map<String, String> rdmaParams,
                                               Map<String, Map<String, String>> moreRdmaAcceptors,
                                               Map<String, Map<String, String>> moreTcpAcceptors) throws Exception {
        System.setProperty("rdma.host", host);
        System.setProperty("rdma.port", Integer.toString(port));
        try {
            FileDeploymentManager deployment = new FileDeploymentManager(configDir().resolve("broker.xml").toUri()
                    .toString());
            FileConfiguration config = new FileConfiguration();
            deployment.addDeployable(config);
            deployment.readConfiguration();
            writable(config, dataDir, persistent);
            TransportConfiguration rdma = config.getAcceptorConfigurations().stream()
                    .filter(a -> "rdma".equals(a.getName())).findFirst()
                    .orElseThrow(() -> new IllegalStateException("config/broker.xml has no acceptor 'rdma'"));
            if (!rdmaParams.isEmpty()) {
                config.getAcceptorConfigurations().remove(rdma);
                config.addAcceptorConfiguration(changed(rdma, rdma.getFactoryClassName(), rdma.getName(), rdmaParams));
            }
            moreRdmaAcceptors.forEach((name, params) -> config.addAcceptorConfiguration(
                    changed(rdma, RdmaAcceptorFactory.class.getName(), name, params)));
            if (tcpPort > 0) {
                config.addAcceptorConfiguration(new TransportConfiguration(NettyAcceptorFactory.class.getName(),
                        Map.of("host", host, "port", tcpPort, "protocols", "CORE"), "tcp"));
            }
            moreTcpAcceptors.forEach((name, params) -> {
                Map<String, Object> p = new HashMap<>(Map.of("host", host, "protocols", "CORE"));
                p.putAll(params);
                config.addAcceptorConfiguration(new TransportConfiguration(NettyAcceptorFactory.class.getName(), p,
                        name));
            });
            ActiveMQServer server = new ActiveMQServerImpl(config, new ActiveMQJAASSecurityManager());
            server.start();
            if (!server.isActive()) {
                throw new IllegalStateException("broker did not become active");
            }
            return new LabBroker(server);
        } finally {
            System.clearProperty("rdma.host");
            System.clearProperty("rdma.port");
        }
    }

    /** A copy of {@code acceptor}, made by {@code factory} and named {@code name}, with {@code changes} made. */
    private static TransportConfiguration changed(TransportConfiguration acceptor, String factory, String name,
                                                  Map<String, String> changes) {
        Map<String, Object> params = new HashMap<>(acceptor.getParams());
        params.putAll(changes);
        return new TransportConfiguration(factory, params, name);
    }

    public static Configuration writable(Configuration config, Path dataDir, boolean persistent) {
        config.setBrokerInstance(dataDir.toFile());
        return config.setPersistenceEnabled(persistent)
                .setJMXManagementEnabled(false)
                .setSecurityEnabled(false)
                .setJournalDirectory(dataDir.resolve("journal").toString())
                .setBindingsDirectory(dataDir.resolve("bindings").toString())
                .setPagingDirectory(dataDir.resolve("paging").toString())
                .setLargeMessagesDirectory(dataDir.resolve("large-messages").toString());
    }

    public ActiveMQServer server() {
        return server;
    }

    @Override
    public void close() throws Exception {
        server.stop();
    }
}
