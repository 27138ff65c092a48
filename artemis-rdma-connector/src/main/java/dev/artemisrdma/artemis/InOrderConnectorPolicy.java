package dev.artemisrdma.artemis;

import org.apache.activemq.artemis.api.core.client.loadbalance.ConnectionLoadBalancingPolicy;

/**
 * Tries a client's connectors in the order they are listed, from the first, then round: an {@code rdma://} URL whose
 * fragment names a {@code tcp://} broker after it ({@link RdmaConnectionFactories}) connects over RDMA whenever it
 * can, and over TCP only when RDMA fails (no RDMA device on the client, no RDMA acceptor on the broker). Artemis's
 * default policy starts at a random connector, so without this half the connections would go over TCP first.
 *
 * <p>One instance per server locator, which calls it from the thread that connects; the position is read and moved
 * by that thread only, so a plain field does.
 */
public final class InOrderConnectorPolicy implements ConnectionLoadBalancingPolicy {

    private int next;

    @Override
    public int select(int max) {
        if (max <= 0) {
            return 0;
        }
        int chosen = next % max;
        next = chosen + 1;
        return chosen;
    }
}
