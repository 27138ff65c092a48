package dev.artemisrdma.transport.channel;

import java.net.InetSocketAddress;

import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.CompletionQueue;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.Endpoints;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.PartialPostException;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairCaps;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.fabric.QueuePairSpec;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.wire.Handshake;

/**
 * One job: the set-up of the channel's queue pair, as its set-up thread drives it. It says what this side offers in
 * the handshake ({@link #localParams}), binds the channel to a completion loop and its memory ({@link #bind}),
 * specifies and takes the queue pair and posts its first receives ({@link #setup}), hands rdma_cm's events to the
 * loop ({@link #events}), and asks the loop to carry out the set-up's outcome, waiting for its verdict on the
 * asking thread ({@link #activeEstablished}, {@link #setupFailed}, {@link #failHandshake}); the loop's side of
 * that is {@link SetupOutcome}.
 *
 * <p>Owner: the set-up thread (the connecting caller; rdma_cm's thread for an accept), under the channel's lock for
 * every change (bind and attach: before the peer can send, and before the loop polls anything of the channel).
 * rdma_cm's and the device's event threads only post to the loop ({@link ChannelCommands}). {@link #local} is written
 * at attach and read by anyone without the lock (volatile).
 */
final class QueuePairSetup extends ChannelPart {

    private final ChannelHost transport;
    private final int slots;
    private final int slotSize;
    /** This side states TLS in its handshake (its {@link ChannelSpec}). */
    private final boolean speaksTls;
    /** The channel as its completion loop knows it: registered at bind, its queue pair mapped at attach. */
    private final LoopSide loop;
    private final ChannelCommands commands;
    private volatile InetSocketAddress local;

    QueuePairSetup(ChannelPart core, ChannelHost transport, InetSocketAddress local, boolean speaksTls, LoopSide loop) {
        super(core);
        this.transport = transport;
        this.local = local;
        this.slots = config.postedReceives();
        this.slotSize = config.slotSize();
        this.speaksTls = speaksTls;
        this.loop = loop;
        this.commands = loop.commands();
    }

    /** The local address: the request's (passive side), then the queue pair's once attached. */
    InetSocketAddress local() {
        return local;
    }

    /**
     * What this side offers the peer in the handshake. Every side states credit growth (it takes grants up to the
     * maximum its peer states); only one on a shared pool offers a window that grows (minimum up to receiveSlots + 1).
     */
    Handshake.Params localParams() {
        int features = Handshake.KNOWN_FEATURES | (speaksTls ? Handshake.FEATURE_TLS : 0); // all this build reads
        if (shared.shares()) {
            return new Handshake.Params(slotSize, TransportConfig.SHARED_MIN_CREDITS, config.maxFrameSize(), features,
                    shared.maxCredits());
        }
        return new Handshake.Params(slotSize, slots, config.maxFrameSize(), features, slots);
    }

    /** The connection-manager side of this channel: builds its queue pair and follows its events. */
    ConnectionSetup setup() {
        return new ConnectionSetup() {
            @Override
            public QueuePairSpec queuePairSpec(FabricDevice device) throws FabricException {
                lock.lock();
                try {
                    bind(device, false);
                    resources.queuePairPending();
                    CompletionQueue queue = resources.loop().completionQueue();
                    if (shared.shares()) {
                        return new QueuePairSpec(queue, config.sendQueueDepth(), 1, 2, 1, config.inlineWanted(),
                                shared.queue());
                    }
                    return new QueuePairSpec(queue, config.sendQueueDepth(), slots, 2, 1, config.inlineWanted());
                } finally {
                    lock.unlock();
                }
            }

            @Override
            public void prepare(QueuePair queuePair) throws FabricException {
                attach(queuePair);
            }
        };
    }

    /**
     * rdma_cm's events for this channel's queue pair (the connection manager's thread, or the device's event thread):
     * each is handed to the channel's loop, which carries it out ({@link LoopSide#runCommands}). The passive side's
     * handler is made there too: the application's {@code onAccepted} (for Artemis a {@code Connection}, with its
     * plugins) may take as long as it likes on the loop; on this thread it would hold every connection event of the
     * fabric (issue 37, hole 6).
     */
    QueuePairEvents events() {
        return new QueuePairEvents() {
            @Override
            public void established(QueuePair queuePair) {
                commands.established();
            }

            @Override
            public void disconnected(QueuePair queuePair, String reason) {
                commands.disconnected(reason);
            }
        };
    }

    /**
     * Binds an accepted connection to its loop and memory on {@code device} before the accept, so that a refusal (every
     * loop full, memory refused) can still reject the request with its reason: once an accept has begun, librdmacm's
     * own reject carries none, and the client would read "nobody listens on that port".
     */
    void bindBeforeAccept(FabricDevice device) throws FabricException {
        lock.lock();
        try {
            bind(device, true);
        } finally {
            lock.unlock();
        }
    }

    /** Takes a completion loop slot and registers this connection's memory on the device the route chose. */
    private void bind(FabricDevice device, boolean early) throws FabricException {
        boolean wasBound = resources.loop() != null;
        resources.bind(transport, loop, device, completionEntries(),
                config.registeredBytesPerConnection(shared.shares()), shared, early);
        if (!wasBound && !shared.shares()) {
            receive.attach(resources.memory(), resources.index());
        }
    }

    /**
     * Completion queue entries this connection can ever have outstanding: all receives plus the send budget; on a
     * shared pool the send budget alone (the loop reserves the pool's receives once).
     */
    private int completionEntries() {
        return config.completionEntriesPerConnection(shared.shares());
    }

    /**
     * The queue pair exists: size the send side by what it really got, and post every receive. From this call on the
     * queue pair is this channel's, whatever follows: the fabric hands it over and never destroys it, the channel does
     * (on a failure here, through {@link #setupFailed}, which the transport calls). Only a CONNECTING channel
     * takes one: a channel released meanwhile (its handshake deadline passed, or its loop died, while the accept was
     * under way) has no memory to post receives into and no loop to poll them, so the queue pair is destroyed here.
     */
    private void attach(QueuePair queuePair) throws FabricException {
        lock.lock();
        try {
            FabricException refused = life.refusesQueuePair();
            if (refused != null) {
                resources.refuse(queuePair);
                throw refused;
            }
            resources.attach(queuePair);
            local = queuePair.localAddress();
            QueuePairCaps caps = queuePair.caps();
            if (caps.maxSendSge() < 2) {
                throw new FabricException("channel " + id + ": queue pair offers " + caps.maxSendSge()
                        + " send scatter-gather entries, the transport needs 2");
            }
            if (shared.shares()) {
                send.attach(queuePair, caps, resources.memory(), 0, resources.index(), resources.pool());
                // before the peer can send: its SENDs complete on the pool
                resources.loop().mapQueuePair(resources.qpNumber(), loop);
                return;
            }
            if (caps.maxRecvWr() < slots) {
                throw new FabricException("channel " + id + ": queue pair takes " + caps.maxRecvWr()
                        + " receives, the transport posts " + slots);
            }
            send.attach(queuePair, caps, resources.memory(), config.receiveRegionBytes(), resources.index(),
                    resources.pool());
            RecvList initial = new RecvList(slots);
            for (int s = 0; s < slots; s++) {
                receive.addReceive(initial, s);
            }
            try {
                queuePair.postRecv(initial);
                resources.receivesPosted(slots);
            } catch (FabricException e) {
                resources.receivesPosted(PartialPostException.postedOf(e, initial.size()));
                throw e;
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * Active side: connect returned with the peer's accept. The channel's loop applies the peer's handshake and opens
     * the channel (CONNECTED, {@link SetupOutcome#applyConnected}); this caller waits for its verdict, at most
     * connectTimeout, and throws what applying the handshake threw (a protocol error in it), as when it applied it
     * itself.
     */
    void activeEstablished(Handshake.Params peer) throws FabricException {
        commands.connected(peer).await(config.connectTimeout().toNanos(), () -> new FabricException("channel " + id
                + " (" + Endpoints.describe(remote) + "): its completion loop did not open it within connectTimeout ("
                + config.connectTimeout().toMillis() + " ms): a handler holds the loop"));
    }

    /**
     * Connect or accept failed before the channel was established: the channel's loop releases what bind and attach
     * took (SETUP_FAILED, {@link SetupOutcome#applySetupFailure}): the queue pair at once, the memory where no
     * completion already polled can still read it. This caller waits for the release, briefly. {@code notifyHandler}:
     * the handler is told (none is, on the active side: the caller of connect gets the exception).
     */
    void setupFailed(FabricException why, boolean notifyHandler) {
        commands.setupFailed(new ChannelCommands.SetupFailure(why, notifyHandler, false));
        life.awaitClosed(ChannelLifecycle.CLOSE_GRACE_NANOS);
    }

    /** Active side: the accept reply was not acceptable; the loop tears the established connection down properly. */
    void failHandshake(FabricException why) {
        commands.setupFailed(new ChannelCommands.SetupFailure(why, false, true));
        life.awaitClosed(life.closeWaitNanos());
    }
}
