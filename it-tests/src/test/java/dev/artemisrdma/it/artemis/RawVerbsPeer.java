package dev.artemisrdma.it.artemis;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.wire.FrameHeader;
import dev.artemisrdma.transport.wire.Handshake;
import dev.artemisrdma.verbs.CmEvent;
import dev.artemisrdma.verbs.CmEventType;
import dev.artemisrdma.verbs.IbvCompletionQueue;
import dev.artemisrdma.verbs.IbvMemoryRegion;
import dev.artemisrdma.verbs.IbvQueuePair;
import dev.artemisrdma.verbs.QueuePairCapabilities;
import dev.artemisrdma.verbs.RdmaCmId;
import dev.artemisrdma.verbs.RdmaDevice;
import dev.artemisrdma.verbs.RdmaDevices;
import dev.artemisrdma.verbs.RdmaEventChannel;
import dev.artemisrdma.verbs.RecvRequests;
import dev.artemisrdma.verbs.SendRequests;
import dev.artemisrdma.verbs.VerbsException;
import dev.artemisrdma.verbs.WorkCompletions;

/**
 * A hostile peer on the bare verbs binding: its own rdma_cm id and event channel, completion queue, registered memory
 * and queue pair, and no part of our transport. It can put any bytes into its connect request and into any SEND, keep
 * to the credits the server grants or ignore them, and connect without ever completing the handshake (it never reads
 * its event channel, so librdmacm never answers the server's accept with the RTU).
 *
 * <p>Why this is not {@link dev.artemisrdma.transport.RawPeer} (the one raw peer on the {@code Fabric} SPI, used by
 * the unit tests and the lab's verbs tests): a {@code Fabric} connect is our transport's own connection setup
 * ({@code VerbsFabric} resolves, connects and reads the rdma_cm events itself), so it cannot leave the RTU unsent
 * ({@link #connectAndHold}), and it would put our fabric layer on both ends of the attack. Here the attacker shares
 * nothing with the broker's code but the wire format ({@link FrameHeader}, {@link Handshake}).
 *
 * <p>Memory: {@link #RECEIVES} receive slots of {@link #SLOT} bytes (the server's credit frames land there), then the
 * send area. Its own handshake offers those receives, frames up to 4 KiB, no features.
 */
final class RawVerbsPeer implements AutoCloseable {

    static final int RECEIVES = 32;
    static final int SLOT = 4096;
    private static final int SEND_AREA = 256 << 10;
    private static final long RECV_TAG = 1L << 40;
    private static final int STEP_MILLIS = 5000;

    private final RdmaEventChannel events;
    private final RdmaCmId id;
    private final IbvCompletionQueue cq;
    private final IbvMemoryRegion memory;
    private final IbvQueuePair qp;
    private final WorkCompletions completions = new WorkCompletions(64);
    private final RecvRequests repost = new RecvRequests(1);
    private Handshake.Params server;
    private int credits;
    private int owed;
    private long nextWrId;
    private boolean lost;
    private String lostWhy;
    private boolean disconnectSeen;

    private RawVerbsPeer(RdmaEventChannel events, RdmaCmId id, IbvCompletionQueue cq, IbvMemoryRegion memory,
                         IbvQueuePair qp) {
        this.events = events;
        this.id = id;
        this.cq = cq;
        this.memory = memory;
        this.qp = qp;
    }

    /** The handshake an honest peer sends. */
    static byte[] honestHandshake() {
        return Handshake.encodeConnect(new Handshake.Params(SLOT, RECEIVES, 4096, 0));
    }

    /**
     * The handshake of a peer that states credit growth (so a shared pool serves it and reads its credit-wanted hints)
     * but not recall: it never gives credits back unspent.
     */
    static byte[] growthWithoutRecallHandshake() {
        return Handshake.encodeConnect(new Handshake.Params(SLOT, RECEIVES, 4096, Handshake.FEATURE_CREDIT_GROWTH,
                RECEIVES));
    }

    /** Resolves the route to {@code host:port} and builds the queue pair with every receive posted; not connected. */
    static RawVerbsPeer open(RdmaDevices devices, String host, int port) throws VerbsException {
        return open(devices, null, host, port);
    }

    /** As {@link #open(RdmaDevices, String, int)}, from the local address {@code source} (null: the route's). */
    static RawVerbsPeer open(RdmaDevices devices, String source, String host, int port) throws VerbsException {
        RdmaEventChannel events = new RdmaEventChannel();
        RdmaCmId id = null;
        IbvCompletionQueue cq = null;
        IbvMemoryRegion memory = null;
        try {
            id = resolved(events, source, host, port);
            RdmaDevice device = id.device(devices);
            cq = device.createCompletionQueue(1024);
            memory = device.register((long) RECEIVES * SLOT + SEND_AREA);
            IbvQueuePair qp = id.createQueuePair(device, cq, cq, new QueuePairCapabilities(512, RECEIVES, 1, 1, 0));
            RawVerbsPeer peer = new RawVerbsPeer(events, id, cq, memory, qp);
            try (RecvRequests receives = new RecvRequests(RECEIVES)) {
                for (int slot = 0; slot < RECEIVES; slot++) {
                    receives.add(RECV_TAG | slot, memory.address() + (long) slot * SLOT, SLOT, memory.lkey());
                }
                qp.postRecv(receives);
            }
            return peer;
        } catch (VerbsException | RuntimeException e) {
            if (id != null) {
                id.close();
            }
            if (cq != null) {
                cq.close();
            }
            if (memory != null) {
                memory.close();
            }
            events.close();
            throw e;
        }
    }

    /** A new id on {@code events} with its address and route to {@code host:port} resolved (closed on failure). */
    static RdmaCmId resolved(RdmaEventChannel events, String host, int port) throws VerbsException {
        return resolved(events, null, host, port);
    }

    /**
     * As {@link #resolved(RdmaEventChannel, String, int)}, bound first to the local address {@code source} (one of
     * this host's addresses: its connection requests then come from there) unless it is null.
     */
    static RdmaCmId resolved(RdmaEventChannel events, String source, String host, int port) throws VerbsException {
        RdmaCmId id = RdmaCmId.create(events);
        try {
            if (source != null) {
                id.bind(source, 0);
            }
            id.resolveAddress(host, port, STEP_MILLIS);
            expect(events, CmEventType.ADDR_RESOLVED);
            id.resolveRoute(STEP_MILLIS);
            expect(events, CmEventType.ROUTE_RESOLVED);
            return id;
        } catch (VerbsException | RuntimeException e) {
            id.close();
            throw e;
        }
    }

    private static CmEvent expect(RdmaEventChannel events, CmEventType type) throws VerbsException {
        CmEvent event = events.poll(STEP_MILLIS * 2);
        if (event == null || event.type() != type) {
            throw new VerbsException("raw peer: expected " + type.cName() + ", got " + event);
        }
        return event;
    }

    /**
     * rdma_connect with {@code handshake} as private data; waits for the accept (the server's handshake is decoded)
     * or the reject.
     *
     * @throws Rejected with the server's reason
     */
    void connect(byte[] handshake) throws Exception {
        id.connect(handshake, 7, 7);
        CmEvent event = events.poll(20_000);
        if (event == null) {
            throw new IllegalStateException("raw peer: no answer to rdma_connect within 20 s");
        }
        switch (event.type()) {
            case ESTABLISHED -> {
                qp.markEstablished();
                server = Handshake.decodeAccept(event.privateData());
                credits = server.initialCredits();
            }
            case REJECTED -> throw new Rejected(Handshake.decodeReject(event.privateData()));
            default -> throw new IllegalStateException("raw peer: rdma_connect answered by " + event);
        }
    }

    /**
     * rdma_connect, and nothing after: the event channel is never read, so the server's accept is never answered
     * (no RTU) and the connection never becomes established on the server's side.
     */
    void connectAndHold(byte[] handshake) throws VerbsException {
        id.connect(handshake, 7, 7);
    }

    /** Our address as the server sees it (host:port), for finding the server's log line about us. */
    String localAddress() {
        InetSocketAddress a = id.localAddress();
        return a.getAddress().getHostAddress() + ":" + a.getPort();
    }

    Handshake.Params server() {
        return server;
    }

    /** The payload a fragment carries at most: the server's slot less our header. */
    int fragmentPayload() {
        return server.slotSize() - FrameHeader.LENGTH;
    }

    /**
     * As {@link #fragment(boolean, boolean, int, int)}, carrying {@code payload} (a first fragment that begins a
     * packet the broker will read once the frame is whole).
     */
    void fragment(boolean first, boolean last, int lengthOrOffset, byte[] payload) throws Exception {
        byte[] wire = frame((first ? FrameHeader.FIRST : 0) | (last ? FrameHeader.LAST : 0), takeOwed(),
                lengthOrOffset, payload.length);
        System.arraycopy(payload, 0, wire, FrameHeader.LENGTH, payload.length);
        send(wire, true);
    }

    /** A SEND's bytes: a frame header, then {@code payload} zero bytes. */
    static byte[] frame(int flags, int creditsReturned, int lengthOrOffset, int payload) {
        return frame(flags, 0, creditsReturned, lengthOrOffset, payload);
    }

    /** As {@link #frame(int, int, int, int)}, with {@code hints} ({@link FrameHeader#HINT_CREDIT_WANTED}). */
    static byte[] frame(int flags, int hints, int creditsReturned, int lengthOrOffset, int payload) {
        ByteBuffer b = ByteBuffer.allocate(FrameHeader.LENGTH + payload);
        FrameHeader.write(b, 0, flags, hints, creditsReturned, lengthOrOffset);
        return b.array();
    }

    /**
     * A credit hog's round: spends every credit but the last on credit frames that ask for more
     * ({@link FrameHeader#HINT_CREDIT_WANTED}), returning what it owes so the server can keep granting, then waits
     * {@code millis} for the grants its hints earn. Returns the credits it holds afterwards.
     */
    int spendAskingForMore(long millis) throws Exception {
        while (credits >= 2) {
            send(frame(FrameHeader.CREDIT, FrameHeader.HINT_CREDIT_WANTED, takeOwed(), 0, 0), false);
        }
        long deadline = System.currentTimeMillis() + millis;
        do {
            poll();
            Thread.sleep(1);
        } while (System.currentTimeMillis() < deadline && !lost);
        return credits;
    }

    /** Whether a completion or a DISCONNECTED event said the server dropped us (looks once, without waiting). */
    boolean lostNow() throws Exception {
        return awaitLost(0);
    }

    /**
     * Sends one fragment (credits kept to), returning what we owe the server: {@code first} carries the whole frame's
     * length, later ones their offset.
     */
    void fragment(boolean first, boolean last, int lengthOrOffset, int payload) throws Exception {
        send(frame((first ? FrameHeader.FIRST : 0) | (last ? FrameHeader.LAST : 0), takeOwed(), lengthOrOffset,
                payload), true);
    }

    /** The credits we owe the server, as many as one header carries, taken to return them in the next SEND. */
    private int takeOwed() {
        int give = Math.min(owed, FrameHeader.MAX_CREDITS);
        owed -= give;
        return give;
    }

    /**
     * Posts one SEND of exactly {@code wire} (an empty array: a zero-length SEND) and waits for its completion;
     * waits for a credit first when {@code keepToCredits}.
     *
     * @return the completion's status (0: success)
     */
    int send(byte[] wire, boolean keepToCredits) throws Exception {
        if (keepToCredits) {
            awaitCredit();
        }
        credits--;
        int at = RECEIVES * SLOT;
        memory.buffer().put(at, wire);
        try (SendRequests list = new SendRequests(1, 1)) {
            list.add(nextWrId++, SendRequests.IBV_SEND_SIGNALED);
            if (wire.length > 0) {
                list.addSge(memory.address() + at, wire.length, memory.lkey());
            }
            qp.postSend(list);
        }
        return awaitSendCompletion();
    }

    /** Posts {@code n} copies of {@code wire} in one list, credits ignored, without waiting for them. */
    void burst(byte[] wire, int n) throws VerbsException {
        int at = RECEIVES * SLOT;
        memory.buffer().put(at, wire);
        try (SendRequests list = new SendRequests(n, 1)) {
            for (int i = 0; i < n; i++) {
                list.add(nextWrId++, i == n - 1 ? SendRequests.IBV_SEND_SIGNALED : 0)
                        .addSge(memory.address() + at, wire.length, memory.lkey());
            }
            qp.postSend(list);
        }
        credits -= n;
    }

    private void awaitCredit() throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (credits < 2) { // the last credit is for a frame that returns credit, as our transport does
            poll();
            if (lost) {
                throw new IllegalStateException("raw peer: connection lost while waiting for credit: " + lostWhy);
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("raw peer: no credit from the server within 10 s");
            }
            Thread.sleep(1);
        }
    }

    private int awaitSendCompletion() throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (true) {
            int status = poll();
            if (status >= 0) {
                return status;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("raw peer: a send did not complete within 20 s");
            }
            Thread.sleep(1);
        }
    }

    /**
     * Polls the completion queue once: the server's credit frames are counted and their receives reposted (their
     * credit owed back); a failed completion means the connection is gone. Returns the status of the last send
     * completion polled, or -1.
     */
    private int poll() throws VerbsException {
        int n = cq.poll(completions);
        int sendStatus = -1;
        for (int i = 0; i < n; i++) {
            long wrId = completions.wrId(i);
            int status = completions.status(i);
            if (status != 0) {
                noteLost("work request " + ((wrId & RECV_TAG) != 0 ? "receive" : "send") + " completed with status "
                        + status);
            }
            if ((wrId & RECV_TAG) == 0) {
                sendStatus = status;
                continue;
            }
            if (status != 0) {
                continue;
            }
            int slot = (int) (wrId & 0xFFFF);
            credits += FrameHeader.credits(memory.buffer().duplicate(), slot * SLOT); // big-endian view
            repost.clear();
            repost.add(wrId, memory.address() + (long) slot * SLOT, SLOT, memory.lkey());
            qp.postRecv(repost);
            owed++;
        }
        return sendStatus;
    }

    private void noteLost(String why) {
        if (!lost) {
            lost = true;
            lostWhy = why;
        }
    }

    /** Whether the server has dropped us: a DISCONNECTED event, or our work requests flushed. */
    boolean awaitLost(long timeoutMillis) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMillis;
        while (!lost) {
            poll();
            CmEvent event = events.poll(20);
            if (event != null && event.type() == CmEventType.DISCONNECTED) {
                disconnectSeen = true;
                noteLost("RDMA_CM_EVENT_DISCONNECTED");
            }
            if (System.currentTimeMillis() > deadline) {
                return false;
            }
        }
        return true;
    }

    String lostWhy() {
        return lostWhy;
    }

    /** Disconnects (when connected) and destroys the queue pair and id, then the queue, the memory, the channel. */
    @Override
    public void close() {
        if (server != null && !disconnectSeen) {
            try {
                id.disconnect();
            } catch (VerbsException ignored) {
                // already disconnected by the server
            }
        }
        id.close();
        cq.close();
        memory.close();
        completions.close();
        repost.close();
        events.close();
    }

    /** The server rejected the connect request; the message is its reason. */
    static final class Rejected extends Exception {
        Rejected(String reason) {
            super(reason);
        }
    }
}
