package dev.artemisrdma.transport;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.fabric.CompletionQueue;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.ConnectOptions;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.Fabric;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.fabric.QueuePairSpec;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.fabric.RegisteredMemory;
import dev.artemisrdma.transport.fabric.SendList;
import dev.artemisrdma.transport.fabric.WcStatus;
import dev.artemisrdma.transport.wire.FrameHeader;
import dev.artemisrdma.transport.wire.Handshake;
import dev.artemisrdma.transport.wire.ImmediateHeader;
import dev.artemisrdma.transport.wire.WorkRequestIds;

/**
 * One side of a raw connection on any {@link Fabric} (the {@code FakeFabric} in unit tests, {@code VerbsFabric} in the
 * lab): its own completion queue, registered slab and queue pair, and no part of our transport. Owned by the test
 * thread that made it; the fabric's event thread only counts down {@link #established} and {@link #disconnected}.
 * The slab holds a send area, then the receive slots.
 *
 * <ul>
 * <li>As a bare endpoint ({@link #RawPeer(int, int, int)}: the lab's verbs tests), a {@link ConnectionSetup} and
 * {@link QueuePairEvents} for {@code connect} or {@code accept}: receives posted into fixed 4 KiB slots (work request
 * id = slot), completions collected by {@link #awaitCompletions}; no protocol.</li>
 * <li>As a hostile peer of our transport ({@link #connect}: the unit tests' hostile-peer suites): it sends any
 * handshake and any frame header it likes, keeps to the receive credits it was given unless told otherwise (so what it
 * sends arrives instead of failing on the wire), and reposts the receives the server's frames used.</li>
 * </ul>
 *
 * <p>The lab's hostile broker test uses {@code RawVerbsPeer} instead, on librdmacm itself: it must connect and never
 * read its event channel (no RTU), which a {@code Fabric} connect, driving the rdma_cm events itself, cannot do.
 */
public final class RawPeer implements ConnectionSetup, QueuePairEvents, AutoCloseable {

    /** The hostile peer's receives and their slot size. */
    public static final int RECEIVES = 64;
    public static final int SLOT = 16 << 10;
    /** The bare endpoint's receive slot size. */
    public static final int ENDPOINT_SLOT = 4096;

    private final Shape shape;
    private final List<Received> received = new CopyOnWriteArrayList<>();
    private final Completions batch = new Completions(64);
    public final CountDownLatch established = new CountDownLatch(1);
    public final CountDownLatch disconnected = new CountDownLatch(1);
    /** Set before a connect or accept: {@link #prepare} tries a send before the connection is established. */
    public volatile boolean tryEarlySend;
    /** What that early send threw. */
    public volatile Throwable prepareFailure;
    private CompletionQueue cq;
    private RegisteredMemory memory;
    private QueuePair qp;
    private boolean hostile;
    private Handshake.Params server;
    private int credits;
    private int owed;
    private long nextWrId;
    private volatile boolean lost;

    /** A bare endpoint: {@code receives} posted receives, {@code maxSendSge} (0: the device's most), inline bytes. */
    public RawPeer(int receives, int maxSendSge, int maxInline) {
        this(receives, maxSendSge, maxInline, 1024);
    }

    /** As {@link #RawPeer(int, int, int)}, with a completion queue of {@code cqEntries} (the device may round up). */
    public RawPeer(int receives, int maxSendSge, int maxInline, int cqEntries) {
        this(new Shape(receives, ENDPOINT_SLOT, 512 << 10, 128, maxSendSge, maxInline, cqEntries, 0));
    }

    private RawPeer(Shape shape) {
        this.shape = shape;
    }

    /**
     * Receives of {@code slot} bytes after a send area of {@code sendArea} bytes; the queue pair's send depth, SGEs
     * (0: the device's most) and inline bytes; the completion queue's entries; and {@code recvTag}, or-ed into the
     * receives' work request ids (the hostile peer tells its receives from its sends by it).
     */
    private record Shape(int receives, int slot, int sendArea, int sendDepth, int maxSendSge, int maxInline,
                         int cqEntries, long recvTag) {
    }

    @Override
    public QueuePairSpec queuePairSpec(FabricDevice device) throws FabricException {
        cq = device.createCompletionQueue(shape.cqEntries);
        memory = device.register(shape.sendArea + Math.max(shape.sendArea, shape.receives * shape.slot));
        int sge = shape.maxSendSge <= 0 ? device.limits().maxSge() : shape.maxSendSge;
        return new QueuePairSpec(cq, shape.sendDepth, Math.max(1, shape.receives), sge, 1, shape.maxInline);
    }

    @Override
    public void prepare(QueuePair queuePair) throws FabricException {
        this.qp = queuePair; // ours from here on: close() destroys it if the connect fails
        if (tryEarlySend) {
            try {
                SendList list = new SendList(1, 1);
                list.addSend(1, SendList.FLAG_SIGNALED).addSge(memory.address(), 8, memory.lkey());
                queuePair.postSend(list);
            } catch (FabricException e) {
                prepareFailure = e;
            }
        }
        if (shape.receives > 0) {
            RecvList list = new RecvList(shape.receives);
            for (int s = 0; s < shape.receives; s++) {
                list.add(shape.recvTag | s, recvSlotAddress(s), shape.slot, memory.lkey());
            }
            queuePair.postRecv(list);
        }
    }

    @Override
    public void established(QueuePair queuePair) {
        established.countDown();
    }

    @Override
    public void disconnected(QueuePair queuePair, String reason) {
        lost = true;
        disconnected.countDown();
    }

    /** Receive slots follow the send area. */
    public long recvSlotAddress(int s) {
        return memory.address() + shape.sendArea + (long) s * shape.slot;
    }

    /** The first {@code length} bytes of receive slot {@code s}. */
    public ByteBuffer recvSlot(int s, int length) {
        ByteBuffer b = memory.buffer();
        int start = shape.sendArea + s * shape.slot;
        b.position(start).limit(start + length);
        return b.slice();
    }

    public QueuePair qp() {
        return qp;
    }

    public CompletionQueue cq() {
        return cq;
    }

    public RegisteredMemory memory() {
        return memory;
    }

    /**
     * Polls until {@code n} completions arrived or the timeout passed; returns them in arrival order, each as
     * {wrId, status, opcode, byteLength}.
     */
    public List<long[]> awaitCompletions(int n, long timeoutMillis) throws FabricException {
        List<long[]> got = new ArrayList<>();
        Completions completions = new Completions(32);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        while (got.size() < n && System.nanoTime() < deadline) {
            int k = cq.poll(completions);
            for (int i = 0; i < k; i++) {
                got.add(new long[] {completions.wrId(i), completions.status(i), completions.opcode(i),
                        completions.byteLength(i)});
            }
            if (k == 0) {
                Thread.onSpinWait();
            }
        }
        return got;
    }

    // ------------------------------------------------------------------------ the hostile peer of our transport

    /** A peer that states honest values: 64 receives of 16 KiB, frames up to 64 MiB. */
    static byte[] honestHandshake() {
        return Handshake.encodeConnect(new Handshake.Params(SLOT, RECEIVES, 64 << 20));
    }

    /**
     * A hostile peer: 64 receives of 16 KiB, connected with {@code handshake} as its connect private data; the
     * server's accept is decoded.
     */
    public static RawPeer connect(Fabric fabric, InetSocketAddress server, byte[] handshake) throws Exception {
        RawPeer p = new RawPeer(new Shape(RECEIVES, SLOT, 1 << 20, 256, 2, 0, 1024, WorkRequestIds.RECV_BIT));
        p.hostile = true;
        try {
            fabric.connect(server, p, new ConnectOptions(handshake, 7, 7, Duration.ofSeconds(5)), p);
        } catch (Exception e) {
            p.close();
            throw e;
        }
        p.server = Handshake.decodeAccept(p.qp.peerPrivateData());
        p.credits = p.server.initialCredits();
        return p;
    }

    public Handshake.Params server() {
        return server;
    }

    /** Sends one SEND: an 8-byte header, then {@code payload}; waits for a credit first unless {@code ignoreCredits}. */
    public void send(int flags, int creditsReturned, int lengthOrOffset, byte[] payload, boolean ignoreCredits)
            throws Exception {
        send(flags, 0, creditsReturned, lengthOrOffset, payload, ignoreCredits);
    }

    /** One whole frame of {@code size} bytes that asks for more credit (HINT_CREDIT_WANTED), returning what it owes. */
    public void sendWantingCredit(int size) throws Exception {
        int give = Math.min(owed, FrameHeader.MAX_CREDITS);
        owed -= give;
        send(FrameHeader.FIRST | FrameHeader.LAST, FrameHeader.HINT_CREDIT_WANTED, give, size, new byte[size], false);
    }

    /** {@link #send(int, int, int, byte[], boolean)} with the header's {@code hints}. */
    public void send(int flags, int hints, int creditsReturned, int lengthOrOffset, byte[] payload,
                     boolean ignoreCredits) throws Exception {
        if (!ignoreCredits) {
            awaitCredit();
            credits--;
        }
        int at = 0; // the send area
        ByteBuffer area = memory.buffer();
        FrameHeader.write(area, at, flags, hints, creditsReturned, lengthOrOffset);
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
    public void sendImmediate(int immediate, int size) throws Exception {
        awaitCredit();
        credits--;
        int at = 0; // the send area
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
        int at = 0; // the send area
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
    public void burstIgnoringCredits(int count, int size) throws Exception {
        int at = 0; // the send area
        ByteBuffer area = memory.buffer();
        FrameHeader.write(area, at, FrameHeader.FIRST | FrameHeader.LAST, 0, size);
        SendList list = new SendList(count, 2 * count);
        for (int i = 0; i < count; i++) {
            list.addSend(nextWrId++, SendList.FLAG_SIGNALED)
                    .addSge(memory.address() + at, FrameHeader.LENGTH + size, memory.lkey());
        }
        qp.postSend(list);
    }

    public void poll() throws FabricException {
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
            int s = (int) (wrId & 0xFFFF);
            ByteBuffer b = memory.buffer();
            received.add(new Received(batch.byteLength(i), batch.immediate(i)));
            if (batch.immediate(i) == Completions.NO_IMMEDIATE) {
                credits += FrameHeader.credits(b, shape.sendArea + s * shape.slot);
            } else if (!ImmediateHeader.isFirst((int) batch.immediate(i))) {
                credits += ImmediateHeader.credits((int) batch.immediate(i));
            }
            RecvList again = new RecvList(1);
            again.add(wrId, recvSlotAddress(s), shape.slot, memory.lkey());
            qp.postRecv(again);
            owed++;
        }
        return sendDone || !send && n > 0;
    }

    /** One SEND the server sent us: its length and its immediate data (Completions.NO_IMMEDIATE for none). */
    public record Received(int byteLength, long immediate) {
    }

    /** Every SEND that arrived from the server, in order. */
    public List<Received> received() {
        return received;
    }

    /** The credits the server sent us and we have not spent (as of the last poll). */
    public int credits() {
        return credits;
    }

    public boolean isLost() {
        return lost;
    }

    /** Waits until the server has dropped this connection. */
    public void awaitLost(long millis) throws Exception {
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
            if (hostile) {
                try {
                    Thread.sleep(20);
                    poll();
                } catch (Exception ignored) {
                    // tearing down a test peer
                }
            }
            qp.close();
        }
        if (memory != null) {
            memory.close();
        }
        if (cq != null) {
            cq.close();
        }
    }
}
