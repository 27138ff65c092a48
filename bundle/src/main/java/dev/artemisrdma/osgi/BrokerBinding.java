package dev.artemisrdma.osgi;

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import dev.artemisrdma.artemis.RdmaAcceptorFactory;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.remoting.server.RemotingService;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.ServiceRegistry;
import org.apache.activemq.artemis.core.server.plugin.ActiveMQServerBasePlugin;
import org.apache.activemq.artemis.spi.core.remoting.Acceptor;
import org.apache.activemq.artemis.spi.core.remoting.AcceptorFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** What this bundle did to one broker, and how to undo it. */
final class BrokerBinding {

    private static final Logger logger = LoggerFactory.getLogger(BrokerBinding.class);
    private static final String FACTORY = RdmaAcceptorFactory.class.getName();

    private final ActiveMQServer server;
    private final ClassLoader ours;

    BrokerBinding(ActiveMQServer server, ClassLoader ours) {
        this.server = server;
        this.ours = ours;
    }

    ActiveMQServer server() {
        return server;
    }

    /** Creates and starts the configured RDMA acceptors the broker could not create itself. */
    synchronized void bind() {
        if (!server.isStarted() || server.getRemotingService() == null) {
            logger.info("artemis-rdma: broker {} is not started; nothing to bind", name());
            return;
        }
        RemotingService remoting = server.getRemotingService();
        for (TransportConfiguration config : server.getConfiguration().getAcceptorConfigurations()) {
            if (!FACTORY.equals(config.getFactoryClassName())) {
                continue;
            }
            Acceptor existing = remoting.getAcceptor(config.getName());
            if (existing != null && existing.isStarted()) {
                logger.info("artemis-rdma: broker {} already runs RDMA acceptor '{}'", name(), config.getName());
                continue;
            }
            try {
                if (existing != null) {
                    remoting.destroyAcceptor(config.getName());
                }
                server.getServiceRegistry().addAcceptorFactory(config.getName(), new RdmaAcceptorFactory());
                Acceptor acceptor = remoting.createAcceptor(config);
                acceptor.start();
                logger.info("artemis-rdma: started RDMA acceptor '{}' on broker {}", config.getName(), name());
            } catch (Exception e) {
                logger.error("artemis-rdma: RDMA acceptor '{}' of broker {} failed to start: {}", config.getName(),
                        name(), e.getMessage(), e);
                destroyQuietly(remoting, config.getName());
            }
        }
    }

    /** Destroys this bundle's acceptors and takes its factories and plugins out of the broker; the broker goes on. */
    synchronized void unbind() {
        RemotingService remoting = server.getRemotingService();
        List<String> destroyed = new ArrayList<>();
        if (remoting != null) {
            for (Map.Entry<String, Acceptor> entry : Map.copyOf(remoting.getAcceptors()).entrySet()) {
                if (isOurs(entry.getValue())) {
                    destroyQuietly(remoting, entry.getKey());
                    destroyed.add(entry.getKey());
                }
            }
        }
        for (ActiveMQServerBasePlugin plugin : List.copyOf(server.getBrokerPlugins())) {
            if (isOurs(plugin)) {
                server.unRegisterBrokerPlugin(plugin);
            }
        }
        int factories = forgetOurFactories(server.getServiceRegistry());
        logger.info("artemis-rdma: broker {}: destroyed RDMA acceptors {}, dropped {} cached factories", name(),
                destroyed, factories);
    }

    /** Stops the whole broker (its OSGi component is gone and would leave it running). */
    synchronized void stopBroker() {
        try {
            if (server.isStarted()) {
                logger.info("artemis-rdma: the ActiveMQServer service of broker {} went away with the broker still "
                        + "running; stopping it", name());
                server.stop();
            }
        } catch (Exception e) {
            logger.error("artemis-rdma: stopping broker {} failed: {}", name(), e.getMessage(), e);
        } finally {
            unbind();
        }
    }

    private boolean isOurs(Object o) {
        return o != null && o.getClass().getClassLoader() == ours;
    }

    private void destroyQuietly(RemotingService remoting, String acceptor) {
        try {
            remoting.destroyAcceptor(acceptor);
        } catch (Exception e) {
            logger.warn("artemis-rdma: destroying acceptor '{}' of broker {} failed: {}", acceptor, name(),
                    e.getMessage(), e);
        }
    }

    /**
     * The broker caches every acceptor factory by acceptor name and its {@link ServiceRegistry} has no remove
     * method; a factory left there pins this bundle's class loader and would be reused if the broker restarted.
     * {@code ServiceRegistryImpl} keeps them in a private map (2.43.0 to 2.56.0), which is edited here.
     */
    private int forgetOurFactories(ServiceRegistry registry) {
        try {
            Field field = registry.getClass().getDeclaredField("acceptorFactories");
            field.setAccessible(true);
            @SuppressWarnings("unchecked")
            Map<String, AcceptorFactory> factories = (Map<String, AcceptorFactory>) field.get(registry);
            int before = factories.size();
            factories.values().removeIf(this::isOurs);
            return before - factories.size();
        } catch (ReflectiveOperationException | RuntimeException e) {
            logger.warn("artemis-rdma: cannot drop the RDMA acceptor factories cached by broker {} ({}); it keeps "
                    + "a reference to this bundle until it is stopped", name(), e.toString());
            return 0;
        }
    }

    private String name() {
        return String.valueOf(server.getConfiguration().getName());
    }
}
