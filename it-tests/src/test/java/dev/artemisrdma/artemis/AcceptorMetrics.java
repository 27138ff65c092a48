package dev.artemisrdma.artemis;

import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.spi.core.remoting.Acceptor;

/**
 * The transport counters of a broker's RDMA acceptor, read in the broker's JVM (lab tests; in this package to reach
 * them without JMX, which the lab's brokers turn off): what monitoring reads from the acceptor's MXBean.
 */
public final class AcceptorMetrics {

    private AcceptorMetrics() {
    }

    /** The counters of {@code server}'s started RDMA acceptor named {@code acceptor}. */
    public static RdmaTransportMetricsMXBean of(ActiveMQServer server, String acceptor) {
        Acceptor found = server.getRemotingService().getAcceptor(acceptor);
        if (!(found instanceof RdmaAcceptor rdma) || rdma.metrics() == null) {
            throw new IllegalStateException("broker " + server.getIdentity() + " has no started RDMA acceptor '"
                    + acceptor + "': " + found);
        }
        return rdma.metrics();
    }
}
