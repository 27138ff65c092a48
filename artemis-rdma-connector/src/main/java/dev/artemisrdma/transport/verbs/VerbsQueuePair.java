package dev.artemisrdma.transport.verbs;

import dev.artemisrdma.transport.fabric.DeviceEventRouter;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.LogLimiter;
import dev.artemisrdma.transport.fabric.PartialPostException;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairCaps;
import dev.artemisrdma.transport.fabric.QueuePairRefusedException;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.fabric.QueuePairSpec;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.fabric.SendList;
import dev.artemisrdma.verbs.CmEvent;
import dev.artemisrdma.verbs.IbvQueuePair;
import dev.artemisrdma.verbs.PostFailedException;
import dev.artemisrdma.verbs.QueuePairCapabilities;
import dev.artemisrdma.verbs.RdmaCmId;
import dev.artemisrdma.verbs.RecvRequests;
import dev.artemisrdma.verbs.SendRequests;
import dev.artemisrdma.verbs.VerbsException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

import java.net.InetAddress;
import java.net.InetSocketAddress;

/**
 * A {@link QueuePair} over an rdma_cm id and its verbs queue pair. Converts {@link SendList}/{@link RecvList} into
 * native work-request lists (reused, so posting allocates nothing) and turns connection events into
 * {@link QueuePairEvents} calls.
 *
 * <p>Threads: the owning channel's completion loop posts (through {@link PostGate}, which also orders the one release
 * of the native lists after any post under way); rdma_cm's event thread delivers connection events and the
 * connecting thread sets it up; connection state and close are under this object's monitor.
 */
final class VerbsQueuePair implements QueuePair {

    private static final Logger LOG = LoggerFactory.getLogger(VerbsQueuePair.class);
    private static final LogLimiter NOTIFY_FAILED = LogLimiter.site(LOG, Level.WARN,
            "queue pairs that rdma_notify failed on");

    private final VerbsFabric fabric;
    private final RdmaCmId id;
    private final VerbsDevice device;
    private final IbvQueuePair qp;
    private final QueuePairCaps caps;
    private final SendRequests sends;
    private final RecvRequests recvs;
    /**
     * Every post and the release of {@link #sends}, {@link #recvs} and the queue pair go through it: a loop the
     * transport gave up on may still post after the fabric closed this queue pair (see {@link PostGate}).
     */
    private final PostGate gate = new PostGate(this::describe);
    private final InetSocketAddress local;
    private final InetSocketAddress peer;
    private volatile byte[] peerPrivateData;
    private volatile QueuePairEvents events;
    private static final int EINVAL = 22;
    private boolean disconnected;
    /** Receives come from a shared receive queue: none may be posted here. */
    private final boolean sharedReceives;
    private boolean closed;
    private int port;
    /** Runs once the id is destroyed ({@link #whenGone}); guarded by this. */
    private Runnable whenGone;
    /** rdma_destroy_id returned (or failed): nothing of this connection is left in the kernel; guarded by this. */
    private boolean idGone;
    /**
     * What a closed queue pair tells: nothing. Set at close, so that the id waiting for its destroy (a minute for a
     * DREQ the peer does not answer) keeps neither the channel nor the application's connection reachable: its
     * route and its destroy hold this object, which keeps only the id and a few small fields.
     */
    private static final QueuePairEvents AFTER_CLOSE = (queuePair, reason) -> { };

    VerbsQueuePair(VerbsFabric fabric, RdmaCmId id, VerbsDevice device, QueuePairSpec spec, byte[] peerPrivateData,
                   QueuePairEvents events) throws FabricException {
        this.fabric = fabric;
        this.id = id;
        this.device = device;
        this.peerPrivateData = peerPrivateData;
        this.events = events;
        if (!(spec.completionQueue() instanceof VerbsDevice.Cq cq) || cq.device() != device) {
            throw new FabricException("the completion queue of a queue pair must come from " + device.name()
                    + "'s createCompletionQueue");
        }
        dev.artemisrdma.verbs.IbvSharedReceiveQueue srq = null;
        if (spec.sharedReceiveQueue() != null) {
            if (!(spec.sharedReceiveQueue() instanceof VerbsDevice.Srq s) || s.device() != device) {
                throw new FabricException("the shared receive queue of a queue pair must come from " + device.name()
                        + "'s createSharedReceiveQueue");
            }
            srq = s.ibv();
        }
        this.sharedReceives = srq != null;
        try {
            this.qp = id.createQueuePair(device.rdmaDevice(), cq.ibv(), cq.ibv(), new QueuePairCapabilities(
                    spec.maxSendWr(), spec.maxRecvWr(), spec.maxSendSge(), spec.maxRecvSge(), spec.maxInlineData()),
                    srq);
        } catch (VerbsException e) {
            if (e.errno() == EINVAL) {
                throw new QueuePairRefusedException(e.getMessage(), e); // sizes the provider does not allow
            }
            throw new FabricException(e.getMessage(), e);
        }
        QueuePairCapabilities got = qp.capabilities();
        this.caps = new QueuePairCaps(got.maxSendWr(), got.maxRecvWr(), got.maxSendSge(), got.maxRecvSge(),
                got.maxInlineData());
        this.sends = new SendRequests(Math.max(1, got.maxSendWr()), Math.max(1, got.maxSendSge()));
        this.recvs = new RecvRequests(Math.max(1, got.maxRecvWr()));
        this.local = id.localAddress();
        this.peer = id.peerAddress();
    }

    /** The local ACK timeout exponent and retry count the device runs the queue pair with (ibv_query_qp). */
    int[] retryParameters() throws FabricException {
        try {
            return qp.retryParameters();
        } catch (VerbsException e) {
            throw new FabricException(e.getMessage(), e);
        }
    }

    /** The traffic class of the queue pair's address vector, as the device reports it (ibv_query_qp). */
    int trafficClass() throws FabricException {
        try {
            return qp.trafficClass();
        } catch (VerbsException e) {
            throw new FabricException(e.getMessage(), e);
        }
    }

    void setPeerPrivateData(byte[] data) {
        this.peerPrivateData = data;
    }

    void markEstablished() {
        qp.markEstablished();
    }

    /** Connection events after establishment, routed here by the fabric's event thread. */
    void onEvent(CmEvent event) {
        switch (event.type()) {
            case ESTABLISHED -> {
                // passive side: the peer's data came with the request; the RTU that established us carries none
                qp.markEstablished();
                events.established(this);
            }
            case DISCONNECTED -> {
                notifyDisconnected("peer " + describePeer() + " disconnected");
                answerDisconnect();
            }
            case DEVICE_REMOVAL -> {
                // rdma_cm requires this id destroyed before the device can go: the transport's teardown does it
                // (queue pair first, then the id); the fabric frees the device once everything on it is released
                String reason = "RDMA device " + device.name() + " was removed (RDMA_CM_EVENT_DEVICE_REMOVAL)";
                notifyDisconnected(reason);
                fabric.deviceGone(device.name(), reason);
            }
            case CONNECT_ERROR, UNREACHABLE, REJECTED -> notifyDisconnected("connection to " + describePeer()
                    + " failed: " + event);
            // the address the connection was resolved over moved (address removed, bonding failover): fail now, so
            // Artemis fails over at once instead of after the transport's retries run out
            case ADDR_CHANGE -> notifyDisconnected("the local address of the connection to " + describePeer()
                    + " changed (RDMA_CM_EVENT_ADDR_CHANGE)");
            case TIMEWAIT_EXIT -> LOG.debug("{} on queue pair {} to {}", event, qp.qpNumber(), describePeer());
            default -> LOG.debug("ignoring {} on queue pair {} to {}", event, qp.qpNumber(), describePeer());
        }
    }

    /** A device event (port down, fatal error) hit this queue pair; see {@link DeviceEventRouter}. */
    void notifyDeviceEvent(QueuePair self, String reason) {
        notifyDisconnected(reason);
    }

    /** The port of the device the connection runs over, for port events. */
    int portNumber() {
        return id.portNumber();
    }

    /**
     * Answers the peer's DREQ now, whatever became of the channel: a channel that disconnected first (both sides
     * closing at once) or is closed already would otherwise answer only when its id is destroyed, and the peer's
     * rdma_destroy_id waits for that answer, retrying its DREQ every 4 s for about a minute. rdma_disconnect on an id
     * that received a DREQ sends the DREP; on one that already answered it fails with EINVAL, which is fine.
     */
    private void answerDisconnect() {
        if (!fabric.isPortDown(device, id.portNumber())) { // nothing goes through a port that is down
            rdmaDisconnect();
        }
    }

    /** rdma_disconnect: a DREQ, or the DREP to the peer's; EINVAL when there is nothing (left) to disconnect. */
    private void rdmaDisconnect() {
        try {
            id.disconnect();
        } catch (VerbsException e) {
            LOG.debug("rdma_disconnect of queue pair {} to {}: {}", qp.qpNumber(), describePeer(), e.getMessage());
        }
    }

    private void notifyDisconnected(String reason) {
        synchronized (this) {
            if (closed) {
                return;
            }
        }
        events.disconnected(this, reason);
    }

    String describePeer() {
        return peer == null ? "(unknown peer)" : peer.getAddress().getHostAddress() + ":" + peer.getPort();
    }

    @Override
    public FabricDevice device() {
        return device;
    }

    @Override
    public QueuePairCaps caps() {
        return caps;
    }

    @Override
    public int qpNumber() {
        return qp.qpNumber();
    }

    @Override
    public InetSocketAddress localAddress() {
        return local;
    }

    @Override
    public InetSocketAddress peerAddress() {
        return peer;
    }

    @Override
    public byte[] peerPrivateData() {
        byte[] data = peerPrivateData;
        return data == null ? new byte[0] : data.clone();
    }

    @Override
    public boolean isEstablished() {
        return qp.isEstablished();
    }

    @Override
    public void establishedByPeer() {
        qp.markEstablished();
        try {
            if (id.notifyCommunicationEstablished()) {
                LOG.debug("queue pair {} to {}: established by the peer's first frame (rdma_notify)", qp.qpNumber(),
                        describePeer());
            }
        } catch (VerbsException e) {
            // the connection works either way: rdma_cm may still see the RTU, or give the connection up later, and
            // then it fails as any lost connection does
            if (NOTIFY_FAILED.admit()) {
                LOG.warn("queue pair {} to {}: {}; the connection goes on", qp.qpNumber(), describePeer(),
                        e.getMessage());
            }
        }
    }

    @Override
    public void postSend(SendList list) throws FabricException {
        gate.enter("rdma_post_sendv");
        try {
            postSendInGate(list);
        } finally {
            gate.exit();
        }
    }

    private void postSendInGate(SendList list) throws FabricException {
        SendRequests native_ = sends;
        native_.clear();
        int n = list.size();
        if (n > native_.maxRequests()) {
            throw new FabricException("rdma_post_sendv: " + n + " work requests exceed the send queue depth "
                    + native_.maxRequests() + " of queue pair " + qp.qpNumber());
        }
        for (int r = 0; r < n; r++) {
            int flags = list.flags(r);
            int ibvFlags = ((flags & SendList.FLAG_SIGNALED) != 0 ? SendRequests.IBV_SEND_SIGNALED : 0)
                    | ((flags & SendList.FLAG_INLINE) != 0 ? SendRequests.IBV_SEND_INLINE : 0);
            if ((flags & SendList.FLAG_IMMEDIATE) != 0) {
                native_.addWithImmediate(list.wrId(r), ibvFlags, list.immediate(r));
            } else {
                native_.add(list.wrId(r), ibvFlags);
            }
            int count = list.sgeCount(r);
            if (count > native_.maxSgePerRequest()) {
                throw new FabricException("rdma_post_sendv: " + count + " scatter-gather entries exceed max_send_sge "
                        + native_.maxSgePerRequest());
            }
            for (int s = list.firstSge(r), end = s + count; s < end; s++) {
                native_.addSge(list.sgeAddress(s), list.sgeLength(s), list.sgeLkey(s));
            }
        }
        try {
            qp.postSend(native_);
        } catch (PostFailedException e) {
            throw new PartialPostException(e.getMessage(), e, e.posted());
        } catch (VerbsException e) {
            throw new FabricException(e.getMessage(), e);
        }
    }

    @Override
    public void postRecv(RecvList list) throws FabricException {
        if (sharedReceives) {
            throw new FabricException("ibv_post_recv: queue pair " + qpNumber() + " takes its receives from a shared "
                    + "receive queue");
        }
        gate.enter("rdma_post_recvv");
        try {
            postRecvInGate(list);
        } finally {
            gate.exit();
        }
    }

    private void postRecvInGate(RecvList list) throws FabricException {
        RecvRequests native_ = recvs;
        native_.clear();
        int n = list.size();
        if (n > native_.maxRequests()) {
            throw new FabricException("rdma_post_recvv: " + n + " receives exceed the receive queue depth "
                    + native_.maxRequests());
        }
        for (int i = 0; i < n; i++) {
            native_.add(list.wrId(i), list.address(i), list.length(i), list.lkey(i));
        }
        try {
            qp.postRecv(native_);
        } catch (PostFailedException e) {
            throw new PartialPostException(e.getMessage(), e, e.posted());
        } catch (VerbsException e) {
            throw new FabricException(e.getMessage(), e);
        }
    }

    @Override
    public synchronized void disconnect() {
        if (disconnected || closed) {
            return;
        }
        disconnected = true;
        port = id.portNumber();
        if (fabric.isPortDown(device, port)) {
            // no DREQ through a port that is down (see VerbsFabric.isPortDown): flush locally; the peer hears of it
            // when the id is destroyed, once the port is back
            try {
                qp.moveToError();
            } catch (VerbsException e) {
                LOG.debug("moving queue pair {} to error: {}", qp.qpNumber(), e.getMessage());
            }
            return;
        }
        rdmaDisconnect();
    }

    @Override
    public void close() {
        int onPort;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            onPort = port > 0 ? port : id.portNumber();
            events = AFTER_CLOSE; // let go of the channel now, not once the kernel lets go of the id
        }
        fabric.disown(this);
        fabric.untrack(this);
        if (fabric.isPortDown(device, onPort)) {
            try {
                qp.moveToError(); // nothing posted any more; stays quiet until destroyed
            } catch (VerbsException e) {
                LOG.debug("moving queue pair {} to error: {}", qp.qpNumber(), e.getMessage());
            }
            // the queue pair itself goes now (ibv_destroy_qp sends nothing), so its completion queue can go with the
            // transport; only the id, whose destruction sends a DREQ, waits for the port
            int qpNumber = qp.qpNumber();
            destroyQueuePairAndLists();
            LOG.debug("queue pair {} to {} destroyed; its rdma_cm id goes once port {} of {} is back", qpNumber,
                    describePeer(), onPort, device.name());
            fabric.destroyWhenPortUp(device, onPort, this::destroyId, peerHost());
            return;
        }
        // the queue pair goes here, so nothing reads or writes the connection's memory once this returns; the id
        // goes on the fabric's destroyer: rdma_destroy_id may wait for a DREQ the peer never answers
        String what = "qp " + qp.qpNumber() + " to " + describePeer();
        destroyQueuePairAndLists();
        fabric.destroyIdLater(this::destroyId, what, peerHost());
    }

    /**
     * Destroys the queue pair and frees the native lists it was posted through, inside the {@link #gate}: once no
     * post is under way, and no post after (a loop the transport gave up on may still try one; it now fails).
     */
    private void destroyQueuePairAndLists() {
        gate.release(() -> {
            id.destroyQueuePair();
            sends.close();
            recvs.close();
        });
    }

    /** The peer's address, whose ids take turns with other peers' to be destroyed; null when it has none. */
    private InetAddress peerHost() {
        return peer == null ? null : peer.getAddress();
    }

    /** Names the queue pair in errors: its number and peer. */
    private String describe() {
        return "queue pair " + qp.qpNumber() + " to " + describePeer();
    }

    /**
     * Destroys the id. Its events stay routed here until then, so that a DREQ arriving after the close is still
     * answered ({@link #answerDisconnect}); the route goes first, since the id's address may be reused after.
     */
    private void destroyId() {
        try {
            fabric.unroute(id.address());
            id.close();
        } finally {
            // even when rdma_destroy_id failed: the id is not destroyed again, so it waits no more
            Runnable gone;
            synchronized (this) {
                idGone = true;
                gone = whenGone;
                whenGone = null;
            }
            if (gone != null) {
                gone.run();
            }
        }
    }

    @Override
    public void whenGone(Runnable gone) {
        synchronized (this) {
            if (!idGone) {
                whenGone = gone;
                return;
            }
        }
        gone.run();
    }

    @Override
    public String toString() {
        return "qp " + qp.qpNumber() + " " + local + " -> " + describePeer();
    }
}
