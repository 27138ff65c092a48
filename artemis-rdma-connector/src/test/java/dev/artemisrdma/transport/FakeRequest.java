/*
 * Fakes an incoming connection request (RDMA_CM_EVENT_CONNECT_REQUEST): handed to the listener's handler on the
 * fabric's cm thread, which must accept or reject it. Enforces the private-data limits of accept (196 bytes) and reject
 * (148), a second decision, and accepting after the connecting side gave up. State: {@code outcome} and
 * {@code rejectData} are guarded by the fabric's lock, {@code decided} is a condition of it that the connecting
 * thread waits on.
 */
package dev.artemisrdma.transport;

import dev.artemisrdma.transport.FakeQp.QpState;
import dev.artemisrdma.transport.fabric.Addressing;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.inmemory.RequestBase;

import java.util.concurrent.locks.Condition;

final class FakeRequest extends RequestBase<FakeQp> {
    private final FakeFabric fabric;
    final FakeListener listener;
    final Condition decided;
    /** Accepted here while handshakes stall: decided for the passive side, pending for the connecting one. */
    volatile boolean stalled;

    FakeRequest(FakeFabric fabric, FakeListener listener, FakeQp active, byte[] privateData) {
        super(active, listener.address, privateData);
        this.fabric = fabric;
        this.decided = fabric.lock.newCondition();
        this.listener = listener;
    }

    boolean undecided() {
        fabric.lock.lock();
        try {
            return outcome == PENDING && !stalled;
        } finally {
            fabric.lock.unlock();
        }
    }

    @Override
    public FabricDevice device() {
        return fabric.device;
    }

    @Override
    public QueuePair accept(ConnectionSetup setup, byte[] replyData, int rnrRetryCount, QueuePairEvents events)
            throws FabricException {
        if (replyData != null && replyData.length > FakeFabric.MAX_ACCEPT_DATA) {
            throw new IllegalArgumentException("accept private data is limited to " + FakeFabric.MAX_ACCEPT_DATA
                    + " bytes, got " + replyData.length);
        }
        if (!undecided()) {
            throw new IllegalStateException("connection request already decided");
        }
        FakeQp pqp = ConnectionSetup.createFitted(setup, fabric.device, spec -> fabric.createQp(spec, events,
                listener.address, active.local, listener.addressing.retryBudget(Addressing.ACCEPTED_RETRY_COUNT)));
        pqp.incomingRnrRetry = rnrRetryCount;
        pqp.peerPrivateData = privateData.clone();
        pqp.awaitingEstablished = true; // before the peer can send: its first frame may clear it
        try {
            fabric.beforeAcceptPrepare.accept(pqp.qpn);
        } catch (RuntimeException e) {
            fabric.destroyQuietly(pqp); // not handed over yet: still the fabric's
            throw e;
        }
        // prepare hands the queue pair over (ConnectionSetup.prepare): from here on only the channel destroys it
        setup.prepare(pqp);
        if (fabric.stallHandshakes) {
            stalled = true;
            return pqp; // the peer never answers: no established event, the connecting side times out
        }
        Runnable established = () -> {
            pqp.awaitingEstablished = false;
            events.established(pqp);
        };
        boolean held = false;
        fabric.lock.lock();
        try {
            if (outcome != PENDING || active.state != QpState.INIT) {
                throw new FabricException("accept: the connecting side gave up"); // the channel destroys pqp
            }
            active.peer = pqp;
            pqp.peer = active;
            active.peerPrivateData = replyData == null ? new byte[0] : replyData.clone();
            active.state = QpState.RTS;
            pqp.state = QpState.RTS;
            active.everEstablished = true;
            pqp.everEstablished = true;
            if (fabric.holdPassiveEstablished) {
                // held before the connecting side hears the outcome: a test that goes on from its connect finds it
                synchronized (fabric.heldEstablished) {
                    fabric.heldEstablished.add(established);
                }
                held = true;
            }
            outcome = ACCEPTED;
            decided.signalAll();
        } finally {
            fabric.lock.unlock();
        }
        if (!held) {
            fabric.cm.execute(established);
        }
        return pqp;
    }

    @Override
    public void reject(byte[] reason) {
        if (reason != null && reason.length > FakeFabric.MAX_REJECT_DATA) {
            throw new IllegalArgumentException("reject private data is limited to " + FakeFabric.MAX_REJECT_DATA
                    + " bytes, got " + reason.length);
        }
        fabric.lock.lock();
        try {
            if (outcome != PENDING) {
                throw new IllegalStateException("connection request already decided");
            }
            outcome = REJECTED;
            rejectData = reason == null ? new byte[0] : reason.clone();
            decided.signalAll();
        } finally {
            fabric.lock.unlock();
        }
    }

    void rejectIfUndecided() {
        fabric.lock.lock();
        try {
            if (outcome == PENDING) {
                outcome = REJECTED;
                rejectData = new byte[0];
                decided.signalAll();
            }
        } finally {
            fabric.lock.unlock();
        }
    }
}
