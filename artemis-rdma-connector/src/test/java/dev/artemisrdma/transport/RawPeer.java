package dev.artemisrdma.transport;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;

import dev.artemisrdma.transport.fabric.CompletionQueue;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.ConnectOptions;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.fabric.QueuePairSpec;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.fabric.RegisteredMemory;
import dev.artemisrdma.transport.fabric.SendList;
import dev.artemisrdma.transport.fabric.WcStatus;

/**
 * A hostile peer for tests: it speaks raw verbs through the fabric (its own completion queue, memory and queue
 * pair), not our transport, so it can send any handshake and any frame header it likes. It keeps to the receive
 * credits it was given unless told otherwise, so what it sends arrives instead of failing on the wire.
 */
final class RawPeer implements AutoCloseable {

    static final int RECEIVES = 64;
    static final int SLOT = 16 << 10;
    private final java.util.List<Received> received = new java.util.concurrent.CopyOnWriteArrayList<>();
    private static final int SEND_AREA = 1 << 20;

    private final CompletionQueue cq;
    private final RegisteredMemory memory;
    private final Completions batch = new Completions(64);
    private QueuePair qp;
    private Handshake.Params server;
    private int credits;
    private int owed;
    private long nextWrId;
    private volatile boolean lost;

    private RawPeer(FakeFabric fabric) throws FabricException {
        cq = fabric.device().createCompletionQueue(1024);
        memory = fabric.device().register(RECEIVES * SLOT + SEND_AREA);
    }

    /** A peer that states honest values: 64 receives of 16 KiB, frames up to 64 MiB. */
    static byte[] honestHandshake() {
        return Handshake.encodeConnect(new Handshake.Params(SLOT, RECEIVES, 64 << 20));
    }

    /** Connects with {@code handshake} as its connect private data; the server's accept is decoded. */
    static RawPeer connect(FakeFabric fabric, InetSocketAddress server, byte[] handshake) throws Exception {
        RawPeer p = new RawPeer(fabric);
        try {
            p.qp = fabric.connect(server, new ConnectionSetup() {
                @Override
                public QueuePairSpec queuePairSpec(FabricDevice device) {
                    return new QueuePairSpec(p.cq, 256, RECEIVES, 2, 1, 0);
                }

                @Override
                public void prepare(QueuePair queuePair) throws FabricException {
                    p.qp = queuePair; // ours from here on: close() destroys it if the connect fails
                    RecvList receives = new RecvList(RECEIVES);
                    for (int s = 0; s < RECEIVES; s++) {
                        receives.add(WorkRequestIds.RECV_BIT | s, p.memory.address() + (long) s * SLOT, SLOT,
                                p.memory.lkey());
                    }
                    queuePair.postRecv(receives);
                }
            }, new ConnectOptions(handshake, 7, 7, Duration.ofSeconds(5)), new QueuePairEvents() {
                @Override
                public void established(QueuePair queuePair) {
                }

                @Override
                public void disconnected(QueuePair queuePair, String reason) {
                    p.lost = true;
                }
            });
        } catch (Exception e) {
            p.close();
            throw e;
        }
        p.server = Handshake.decodeAccept(p.qp.peerPrivateData());
        p.credits = p.server.initialCredits();
        return p;
    }

    Handshake.Params server() {
        return server;
    }

    /** Sends one SEND: an 8-byte header, then {@code payload}; waits for a credit first unless {@code ignoreCredits}. */
    void send(int flags, int creditsReturned, int lengthOrOffset, byte[] payload, boolean ignoreCredits)
            throws Exception {
        if (!ignoreCredits) {
            awaitCredit();
            credits--;
        }
        int at = RECEIVES * SLOT;
        ByteBuffer area = memory.buffer();
        FrameHeader.write(area, at, flags, creditsReturned, lengthOrOffset);
        area.position(at + FrameHeader.LENGTH);
        area.put(payload);
        SendList list = new SendList(1, 1);
        list.addSend(nextWrId++, SendList.FLAG_SIGNALED)
                .addSge(memory.address() + at, FrameHeader.LENGTH + payload.length, memory.lkey());
        qp.postSend(list);
        awaitSendCompletion();
    }

    /**
     * Sends one SEND with immediate data {@code immediate} and {@code size} bytes of payload, no in-band header; waits
     * for a credit first.
     */
    void sendImmediate(int immediate, int size) throws Exception {
        awaitCredit();
        credits--;
        int at = RECEIVES * SLOT;
        SendList list = new SendList(1, 1);
        list.addSend(nextWrId++, SendList.FLAG_SIGNALED).withImmediate(immediate)
                .addSge(memory.address() + at, size, memory.lkey());
        qp.postSend(list);
        awaitSendCompletion();
    }

    /**
     * Posts {@code n} whole frames of {@code size} bytes in one list, credits or not, and does not wait for them: a
     * peer that ignores flow control. With the server's rnrRetryCount 7 those without a receive wait for one.
     */
    void burst(int n, int size) throws Exception {
        int at = RECEIVES * SLOT;
        ByteBuffer area = memory.buffer();
        FrameHeader.write(area, at, FrameHeader.FIRST | FrameHeader.LAST, 0, size);
        SendList list = new SendList(n, n);
        for (int i = 0; i < n; i++) {
            list.addSend(nextWrId++, SendList.FLAG_SIGNALED).addSge(memory.address() + at, FrameHeader.LENGTH + size,
                    memory.lkey());
        }
        qp.postSend(list);
    }

    /** Sends a fragment of a frame: {@code first} carries the whole frame's length, later ones their offset. */
    void fragment(boolean first, boolean last, int lengthOrOffset, int size) throws Exception {
        int flags = (first ? FrameHeader.FIRST : 0) | (last ? FrameHeader.LAST : 0);
        int give = Math.min(owed, FrameHeader.MAX_CREDITS);
        owed -= give;
        send(flags, give, lengthOrOffset, new byte[size], false);
    }

    /** Sends the first {@code fragments} fragments of a frame said to be {@code frameLength} bytes long. */
    void unfinishedFrame(int frameLength, int fragments) throws Exception {
        int payload = server.slotSize() - FrameHeader.LENGTH;
        for (int i = 0; i < fragments; i++) {
            fragment(i == 0, false, i == 0 ? frameLength : i * payload, payload);
        }
    }

    private void awaitCredit() throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (credits < 2) { // like our transport: the last credit is kept for a frame that returns credit
            poll();
            if (lost) {
                throw new FabricException("raw peer: connection lost while waiting for credit");
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("raw peer: no credit from the server");
            }
            Thread.sleep(1);
        }
    }

    private void awaitSendCompletion() throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (true) {
            if (pollFor(true)) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("raw peer: send did not complete");
            }
            Thread.sleep(1);
        }
    }

    /** Posts {@code count} one-frame SENDs in one list, ignoring credits (poll for what becomes of them). */
    void burstIgnoringCredits(int count, int size) throws Exception {
        int at = RECEIVES * SLOT;
        ByteBuffer area = memory.buffer();
        FrameHeader.write(area, at, FrameHeader.FIRST | FrameHeader.LAST, 0, size);
        SendList list = new SendList(count, 2 * count);
        for (int i = 0; i < count; i++) {
            list.addSend(nextWrId++, SendList.FLAG_SIGNALED)
                    .addSge(memory.address() + at, FrameHeader.LENGTH + size, memory.lkey());
        }
        qp.postSend(list);
    }

    void poll() throws FabricException {
        pollFor(false);
    }

    /** Polls once; credits from the server's frames are counted, their receives reposted. True if a send completed. */
    private boolean pollFor(boolean send) throws FabricException {
        boolean sendDone = false;
        int n = cq.poll(batch);
        for (int i = 0; i < n; i++) {
            long wrId = batch.wrId(i);
            if ((wrId & WorkRequestIds.RECV_BIT) == 0) {
                sendDone = true;
                if (batch.status(i) != WcStatus.SUCCESS) {
                    lost = true;
                }
                continue;
            }
            if (batch.status(i) != WcStatus.SUCCESS) {
                lost = true;
                continue;
            }
            int slot = (int) (wrId & 0xFFFF);
            ByteBuffer b = memory.buffer();
            received.add(new Received(batch.byteLength(i), batch.immediate(i)));
            if (batch.immediate(i) == Completions.NO_IMMEDIATE) {
                credits += FrameHeader.credits(b, slot * SLOT);
            } else if (!ImmediateHeader.isFirst((int) batch.immediate(i))) {
                credits += ImmediateHeader.credits((int) batch.immediate(i));
            }
            RecvList again = new RecvList(1);
            again.add(wrId, memory.address() + (long) slot * SLOT, SLOT, memory.lkey());
            qp.postRecv(again);
            owed++;
        }
        return sendDone || !send && n > 0;
    }

    /** One SEND the server sent us: its length and its immediate data (Completions.NO_IMMEDIATE for none). */
    record Received(int byteLength, long immediate) {
    }

    /** Every SEND that arrived from the server, in order. */
    java.util.List<Received> received() {
        return received;
    }

    boolean isLost() {
        return lost;
    }

    /** Waits until the server has dropped this connection. */
    void awaitLost(long millis) throws Exception {
        Peers.await("the server to drop the raw peer", millis, () -> {
            try {
                poll();
            } catch (FabricException e) {
                lost = true;
            }
            return lost;
        });
    }

    @Override
    public void close() {
        if (qp != null) {
            qp.disconnect();
            try {
                Thread.sleep(20);
                poll();
            } catch (Exception ignored) {
                // tearing down a test peer
            }
            qp.close();
        }
        memory.close();
        cq.close();
    }
}
