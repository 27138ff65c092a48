package dev.artemisrdma.transport;

import java.util.concurrent.atomic.LongAdder;

import dev.artemisrdma.transport.fabric.ConnectionRequest;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.FabricListener;
import dev.artemisrdma.transport.fabric.ForwardingConnectionRequest;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairEvents;

/**
 * What happened to the connection requests that reached one {@link RdmaServer}: accepted, refused (for any reason:
 * a bad handshake, the application, the transport shutting down or out of resources, or the fabric before reading
 * them, their host having too many waiting) and, among the refused, those whose handshake broke the protocol.
 * Counted where the request is answered, so every refusal path is included.
 */
public final class ListenerStats {

    private final LongAdder accepted = new LongAdder();
    private final LongAdder refused = new LongAdder();
    private final LongAdder protocolErrors = new LongAdder();
    /** The listener whose requests the fabric refused unread (a flood past its fair queue), once listening. */
    private volatile FabricListener listener;

    ListenerStats() {
    }

    /** Requests answered with an accept. */
    public long accepted() {
        return accepted.sum();
    }

    /** Requests answered with a reject, those the fabric refused unread included. */
    public long refused() {
        return refused.sum() + refusedUnread();
    }

    /** Requests the fabric refused before they were read: their host had too many waiting already (a flood). */
    public long refusedUnread() {
        FabricListener l = listener;
        return l == null ? 0 : l.requestsRefusedUnread();
    }

    /** From now on, {@code listener}'s requests refused unread are counted among the refused. */
    void countUnreadOf(FabricListener listener) {
        this.listener = listener;
    }

    /** Requests whose handshake (private data) could not be decoded or spoke another protocol version. */
    public long protocolErrors() {
        return protocolErrors.sum();
    }

    void protocolError() {
        protocolErrors.increment();
    }

    /** {@code request}, counting how it is answered. */
    ConnectionRequest counting(ConnectionRequest request) {
        return new ForwardingConnectionRequest(request) {
            @Override
            public QueuePair accept(ConnectionSetup setup, byte[] replyData, int rnrRetryCount,
                                    QueuePairEvents events) throws FabricException {
                QueuePair qp = super.accept(setup, replyData, rnrRetryCount, events);
                accepted.increment();
                return qp;
            }

            @Override
            public void reject(byte[] reason) {
                refused.increment();
                super.reject(reason);
            }
        };
    }
}
