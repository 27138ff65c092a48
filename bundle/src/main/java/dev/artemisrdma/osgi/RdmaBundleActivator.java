package dev.artemisrdma.osgi;

import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleActivator;
import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceReference;
import org.osgi.util.tracker.ServiceTracker;
import org.osgi.util.tracker.ServiceTrackerCustomizer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Binds the bundle's RDMA acceptors to the brokers of the framework (every {@code ActiveMQServer} service, as
 * Artemis's {@code artemis-server-osgi} registers it) and unbinds them when this bundle stops, so that stopping,
 * updating, refreshing or uninstalling the bundle releases every RDMA resource.
 *
 * <ul>
 * <li><b>A broker appears</b>: each acceptor of its configuration whose factory is
 * {@code dev.artemisrdma.artemis.RdmaAcceptorFactory} and that is not running yet (the broker could not load the
 * class by name, because the host fragment is absent or this bundle came later) is created and started here.</li>
 * <li><b>This bundle stops</b>: every acceptor of every broker that runs on this bundle's classes is destroyed, which
 * closes its connections and, with the last one, the process-wide fabric; the broker goes on with its other
 * acceptors. The factories the broker cached, and our broker plugins, are taken out of it so that it keeps no
 * reference to this bundle's classes.</li>
 * <li><b>A broker's service goes away while this bundle runs</b> (its bundle stops or is refreshed, or its
 * configuration is deleted): Artemis's {@code OsgiBroker} only unregisters the service and leaves the broker
 * running, ports bound; this activator stops it.</li>
 * </ul>
 */
public final class RdmaBundleActivator implements BundleActivator {

    private static final Logger logger = LoggerFactory.getLogger(RdmaBundleActivator.class);

    private ServiceTracker<ActiveMQServer, BrokerBinding> tracker;
    private volatile boolean stopping;

    @Override
    public void start(BundleContext context) {
        stopping = false;
        tracker = new ServiceTracker<>(context, ActiveMQServer.class, new Customizer(context));
        tracker.open();
        logger.info("artemis-rdma bundle {} started; tracking brokers", context.getBundle().getVersion());
    }

    @Override
    public void stop(BundleContext context) {
        stopping = true;
        int brokers = tracker.size();
        tracker.close(); // removedService unbinds each broker (stopping == true)
        tracker = null;
        logger.info("artemis-rdma bundle stopped; unbound {} broker(s)", brokers);
    }

    private final class Customizer implements ServiceTrackerCustomizer<ActiveMQServer, BrokerBinding> {
        private final BundleContext context;

        Customizer(BundleContext context) {
            this.context = context;
        }

        @Override
        public BrokerBinding addingService(ServiceReference<ActiveMQServer> reference) {
            ActiveMQServer server = context.getService(reference);
            if (server == null) {
                return null;
            }
            BrokerBinding binding = new BrokerBinding(server, RdmaBundleActivator.class.getClassLoader());
            withOurContextLoader(binding::bind);
            return binding;
        }

        @Override
        public void modifiedService(ServiceReference<ActiveMQServer> reference, BrokerBinding binding) {
        }

        @Override
        public void removedService(ServiceReference<ActiveMQServer> reference, BrokerBinding binding) {
            try {
                if (stopping && !frameworkStopping()) {
                    withOurContextLoader(binding::unbind);
                } else {
                    // the broker's own bundle (or the framework) is going away: OsgiBroker leaves the broker running
                    withOurContextLoader(binding::stopBroker);
                }
            } finally {
                context.ungetService(reference);
            }
        }

        private boolean frameworkStopping() {
            Bundle system = context.getBundle(0);
            return system != null && system.getState() == Bundle.STOPPING;
        }
    }

    /** Runs with this bundle's class loader as the thread context loader (the connector looks classes up there). */
    private static void withOurContextLoader(Runnable action) {
        Thread thread = Thread.currentThread();
        ClassLoader previous = thread.getContextClassLoader();
        thread.setContextClassLoader(RdmaBundleActivator.class.getClassLoader());
        try {
            action.run();
        } catch (RuntimeException e) {
            logger.error("artemis-rdma: {}", e.getMessage(), e);
        } finally {
            thread.setContextClassLoader(previous);
        }
    }
}
