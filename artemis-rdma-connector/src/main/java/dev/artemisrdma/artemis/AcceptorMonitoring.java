package dev.artemisrdma.artemis;

import java.lang.invoke.MethodHandles;

import javax.management.ObjectName;

import org.apache.activemq.artemis.core.server.management.ManagementService;
import org.apache.activemq.artemis.core.server.management.NotificationService;
import org.apache.activemq.artemis.core.server.metrics.MetricsManager;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Publishes one started acceptor's {@link EndpointMetrics}: Micrometer meters {@code artemis.rdma.*} in the broker's
 * registry when a metrics plugin is configured (tags {@code broker}, {@code acceptor}), and an MBean next to the
 * broker's own acceptor MBean when JMX management is on. {@link #close} takes both away again, as NettyAcceptor does
 * with its meters when it stops.
 */
final class AcceptorMonitoring implements AutoCloseable {

    private static final Logger logger = LoggerFactory.getLogger(MethodHandles.lookup().lookupClass());

    private final String acceptor;
    private final RdmaMeters meters;
    private final ManagementService management;
    private final ObjectName mbeanName;

    private AcceptorMonitoring(String acceptor, RdmaMeters meters, ManagementService management,
                               ObjectName mbeanName) {
        this.acceptor = acceptor;
        this.meters = meters;
        this.management = management;
        this.mbeanName = mbeanName;
    }

    /**
     * @param metricsManager the broker's (null without a metrics plugin)
     * @param notifications  what the broker gave the acceptor: its management service, which knows the broker's name
     *                       and JMX domain
     */
    static AcceptorMonitoring publish(String acceptor, EndpointMetrics metrics, MetricsManager metricsManager,
                                      NotificationService notifications) {
        ManagementService management = notifications instanceof ManagementService
                ? (ManagementService) notifications : null;
        String broker = brokerName(management);
        RdmaMeters meters = null;
        if (metricsManager != null && metricsManager.getMeterRegistry() != null) {
            try {
                meters = RdmaMeters.register(metricsManager.getMeterRegistry(), RdmaMeters.ACCEPTOR_PREFIX, metrics,
                        true, MetricsManager.BROKER_TAG_NAME, broker, "acceptor", acceptor);
            } catch (RuntimeException e) {
                // a registry may refuse a meter (a name clash with other meters): the acceptor serves anyway
                logger.warn("RDMA acceptor '{}': its meters could not be registered: {}", acceptor, e.toString());
            }
        }
        ObjectName mbeanName = null;
        if (management != null) {
            try {
                mbeanName = mbeanName(management, acceptor);
                management.registerInJMX(mbeanName, metrics); // a no-op when JMX management is off
            } catch (Exception e) {
                logger.warn("RDMA acceptor '{}': registering its transport MBean {} failed: {}", acceptor, mbeanName,
                        e.toString());
                mbeanName = null;
            }
        }
        return new AcceptorMonitoring(acceptor, meters, management, mbeanName);
    }

    /** {@code org.apache.activemq.artemis:broker="B",component=acceptors,name="A",subcomponent=rdma-transport}. */
    static ObjectName mbeanName(ManagementService management, String acceptor) throws Exception {
        ObjectName acceptorName = management.getObjectNameBuilder().getAcceptorObjectName(acceptor);
        return new ObjectName(acceptorName.getCanonicalName() + ",subcomponent=rdma-transport");
    }

    /** The broker's name as its own meters are tagged (MetricsManager does not tell it); "" if unknown. */
    private static String brokerName(ManagementService management) {
        if (management == null) {
            return "";
        }
        try {
            String quoted = management.getObjectNameBuilder().getActiveMQServerObjectName().getKeyProperty("broker");
            if (quoted == null) {
                return "";
            }
            return quoted.startsWith("\"") ? ObjectName.unquote(quoted) : quoted;
        } catch (Exception e) {
            logger.debug("broker name not available from the management service", e);
            return "";
        }
    }

    @Override
    public void close() {
        if (meters != null) {
            meters.close();
        }
        if (mbeanName != null) {
            try {
                management.unregisterFromJMX(mbeanName);
            } catch (Exception e) {
                logger.warn("RDMA acceptor '{}': unregistering its transport MBean {} failed: {}", acceptor,
                        mbeanName, e.toString());
            }
        }
    }
}
