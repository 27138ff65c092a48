package dev.artemisrdma.it;

import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.api.SendBuffer;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.ConnectOptions;
import dev.artemisrdma.transport.fabric.ConnectionRejectedException;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.fabric.QueuePairSpec;
import dev.artemisrdma.transport.stats.TransportStats;
import dev.artemisrdma.transport.verbs.VerbsFabric;
import dev.artemisrdma.transport.wire.Handshake;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.zip.CRC32;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The transport protocol on the real rxe fabric with rnr_retry_count = 0 on both sides: a single send into a
 * receive that was not posted (one credit mistake) fails the queue pair with IBV_WC_RNR_RETRY_EXC_ERR and the test
 * with it, instead of hiding behind a retry.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class TransportLabTest {

    /** Records every frame's size and checksum in arrival order; can pause reading. */
    private static final class Recorder implements ChannelHandler {
        final List<long[]> frames = Collections.synchronizedList(new ArrayList<>());
        final AtomicReference<FabricException> closedCause = new AtomicReference<>();
        final Set<String> loopThreads = ConcurrentHashMap.newKeySet();
        volatile boolean closed;

        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            loopThreads.add(Thread.currentThread().getName());
            CRC32 crc = new CRC32();
            int size = frame.remaining();
            crc.update(frame);
            frames.add(new long[] {size, crc.getValue()});
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
            closedCause.set(cause);
            closed = true;
        }
    }

    private static byte[] payload(long seed, int index, int size) {
        byte[] b = new byte[size];
        new SplittableRandom(seed * 7919 + index).nextBytes(b);
        return b;
    }

    private static long crc(byte[] b) {
        CRC32 c = new CRC32();
        c.update(b);
        return c.getValue();
    }

    /** 1 byte to 16 MiB, around slot and fragment boundaries, then random sizes. */
    private static int[] sizes(int slot, long seed) {
        List<Integer> sizes = new ArrayList<>(List.of(1, 2, 7, 255, 256, slot - 9, slot - 8, slot - 1, slot,
                slot + 1, 2 * slot, 3 * slot + 5, 65536, 1 << 20, 16 << 20));
        SplittableRandom random = new SplittableRandom(seed);
        for (int i = 0; i < 300; i++) {
            sizes.add(1 + random.nextInt(random.nextInt(10) == 0 ? 256 * 1024 : 4096));
        }
        return sizes.stream().mapToInt(Integer::intValue).toArray();
    }

    /** Writes every frame, alternating zero-copy (registered buffer) and copying writes, honouring writability. */
    private static void send(RdmaChannel channel, long seed, int[] sizes) throws Exception {
        for (int i = 0; i < sizes.length; i++) {
            byte[] data = payload(seed, i, sizes[i]);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (!channel.isWritable()) {
                assertTrue(System.nanoTime() < deadline, "channel stayed unwritable");
                Thread.sleep(1);
            }
            if (i % 2 == 0) {
                SendBuffer buffer = channel.allocate(data.length);
                buffer.buffer().put(data);
                channel.write(buffer, true);
            } else {
                channel.write(ByteBuffer.wrap(data), true);
            }
        }
    }

    private static void awaitFrames(Recorder recorder, int count, long timeoutSeconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
        while (recorder.frames.size() < count && System.nanoTime() < deadline && !recorder.closed) {
            Thread.sleep(5);
        }
    }

    private static void assertReceived(Recorder recorder, long seed, int[] sizes) {
        assertNull(recorder.closedCause.get(), "channel failed");
        assertEquals(sizes.length, recorder.frames.size(), "frames received");
        for (int i = 0; i < sizes.length; i++) {
            long[] got = recorder.frames.get(i);
            assertEquals(sizes[i], got[0], "size of frame " + i);
            assertEquals(crc(payload(seed, i, sizes[i])), got[1], "content of frame " + i);
        }
    }

    /** A transport pair over one fabric: the server on rxe1's address, the client connecting to it. */
    private static final class Link implements AutoCloseable {
        final RdmaTransport serverTransport;
        final RdmaTransport clientTransport;
        final RdmaServer server;
        final Recorder atServer = new Recorder();
        final Recorder atClient = new Recorder();
        final RdmaChannel client;
        final RdmaChannel serverChannel;

        Link(VerbsFabric fabric, TransportConfig config) throws Exception {
            serverTransport = RdmaTransport.create(fabric, config);
            clientTransport = RdmaTransport.create(fabric, config);
            CompletableFuture<RdmaChannel> accepted = new CompletableFuture<>();
            server = serverTransport.listen(Lab.address(Lab.addr1(), Lab.freshPort()), channel -> {
                accepted.complete(channel);
                return atServer;
            });
            client = clientTransport.connect(server.localAddress(), atClient);
            serverChannel = accepted.get(30, TimeUnit.SECONDS);
        }

        @Override
        public void close() {
            clientTransport.close();
            serverTransport.close();
        }
    }

    private static TransportConfig strict(int slots, int slotSize) {
        return TransportConfig.defaults().toBuilder().receiveSlots(slots).slotSize(slotSize).rnrRetryCount(0)
                .retryCount(7).build();
    }

    @Test
    void framesFromOneByteToSixteenMebibytesBothDirectionsAtOnce() throws Exception {
        TransportConfig config = strict(64, 16 * 1024);
        int[] toServer = sizes(config.slotSize(), 1);
        int[] toClient = sizes(config.slotSize(), 2);
        try (VerbsFabric fabric = new VerbsFabric(); Link link = new Link(fabric, config)) {
            CompletableFuture<Void> a = CompletableFuture.runAsync(() -> sendUnchecked(link.client, 11, toServer));
            CompletableFuture<Void> b = CompletableFuture.runAsync(() -> sendUnchecked(link.serverChannel, 22,
                    toClient));
            a.get(300, TimeUnit.SECONDS);
            b.get(300, TimeUnit.SECONDS);
            awaitFrames(link.atServer, toServer.length, 300);
            awaitFrames(link.atClient, toClient.length, 300);
            assertReceived(link.atServer, 11, toServer);
            assertReceived(link.atClient, 22, toClient);
            TransportStats stats = link.client.stats();
            long bytes = stats.bytesSent() + stats.bytesReceived();
            System.out.println("both directions: " + bytes + " bytes, client stats " + stats);
            assertTrue(bytes > 40_000_000L, "millions of bytes moved: " + bytes);
        }
    }

    /**
     * Issue 24 on rxe: a frame whose in-band header would cost a packet (a multiple of the port's RoCE MTU, whatever it
     * is: 4,096 and 8,192 bytes) or a SEND (a whole slot) goes as one SEND with its header, and the credit it returns,
     * in the immediate data (handshake feature 4); a request/reply of such frames, each echoed at once, arrives intact
     * and sends no credit frame either way. 1,000 bytes, in band, is the control.
     */
    @Test
    void wholeImmediateFramesCarryHeaderAndCreditSoARequestReplySendsNoCreditFrame() throws Exception {
        TransportConfig config = strict(64, 16 * 1024);
        int[] sizes = {1000, 4096, 8192, 16 * 1024};
        int rounds = 100;
        try (VerbsFabric fabric = new VerbsFabric(); Link link = new Link(fabric, config)) {
            int[] frames = new int[sizes.length * rounds];
            for (int i = 0; i < frames.length; i++) {
                frames[i] = sizes[i / rounds];
            }
            for (int i = 0; i < frames.length; i++) {
                link.client.write(ByteBuffer.wrap(payload(44, i, frames[i])), true);
                awaitFrames(link.atServer, i + 1, 30);
                link.serverChannel.write(ByteBuffer.wrap(payload(55, i, frames[i])), true);
                awaitFrames(link.atClient, i + 1, 30);
            }
            assertReceived(link.atServer, 44, frames);
            assertReceived(link.atClient, 55, frames);
            for (RdmaChannel channel : List.of(link.client, link.serverChannel)) {
                TransportStats stats = channel.stats();
                System.out.println("whole immediate frames, " + (channel == link.client ? "client " : "server ")
                        + stats);
                assertEquals(3L * rounds, stats.immediateSends(), "the frames of 4,096, 8,192 and 16,384 bytes, each "
                        + "one SEND with its header in the immediate data: " + stats);
                assertEquals(frames.length, stats.sendsPosted() - stats.creditFramesSent(), "one SEND a frame: "
                        + stats);
                assertEquals(0, stats.creditFramesSent(), "every credit went back with a frame: " + stats);
                assertEquals(0, stats.creditStalls(), stats.toString());
            }
        }
    }

    @Test
    void tinyCreditWindowsAndAPausedReceiverLoseNothing() throws Exception {
        for (int slots : new int[] {1, 2, 3}) {
            TransportConfig config = strict(slots, 4096);
            int[] frames = new int[400];
            SplittableRandom random = new SplittableRandom(slots);
            for (int i = 0; i < frames.length; i++) {
                frames[i] = 1 + random.nextInt(3 * 4096);
            }
            try (VerbsFabric fabric = new VerbsFabric(); Link link = new Link(fabric, config)) {
                link.serverChannel.setAutoRead(false);
                CompletableFuture<Void> writer = CompletableFuture.runAsync(() -> sendUnchecked(link.client, 33,
                        frames));
                Thread.sleep(1500);
                int whilePaused = link.atServer.frames.size();
                assertTrue(whilePaused < frames.length, "a paused receiver stops the sender (got " + whilePaused
                        + ")");
                link.serverChannel.setAutoRead(true);
                writer.get(120, TimeUnit.SECONDS);
                awaitFrames(link.atServer, frames.length, 120);
                assertReceived(link.atServer, 33, frames);
                assertTrue(link.client.stats().creditStalls() > 0, "the window really was exhausted");
            }
        }
    }

    @Test
    void aConnectToAPortNobodyListensOnSaysSo() throws Exception {
        try (VerbsFabric fabric = new VerbsFabric();
             RdmaTransport transport = RdmaTransport.create(fabric, strict(16, 4096))) {
            FabricException refused = assertThrows(FabricException.class, () -> transport.connect(
                    Lab.address(Lab.addr1(), Lab.freshPort()), new Recorder()));
            System.out.println("no listener: " + refused.getMessage());
            // rxe answers with reject reason 28 and 148 zero bytes of private data, not with a reason of ours
            assertTrue(refused.getMessage().contains("nobody listens on that RDMA port"), refused.getMessage());
        }
    }

    @Test
    void aPeerThatIsNotOursIsRejectedWithAReasonAndTheListenerKeepsServing() throws Exception {
        try (VerbsFabric fabric = new VerbsFabric();
             RdmaTransport transport = RdmaTransport.create(fabric, strict(16, 4096))) {
            Recorder recorder = new Recorder();
            RdmaServer server = transport.listen(Lab.address(Lab.addr1(), Lab.freshPort()), channel -> recorder);
            ForeignPeer stranger = new ForeignPeer();
            ConnectionRejectedException rejected = assertThrows(ConnectionRejectedException.class,
                    () -> fabric.connect(server.localAddress(), stranger, new ConnectOptions(
                            "HELLO, I AM NOT ARTEMIS-RDMA".getBytes(), 7, 7, Duration.ofSeconds(20)), stranger));
            String reason = Handshake.decodeReject(rejected.rejectData());
            System.out.println("stranger rejected: " + reason);
            assertTrue(reason.length() > 5 && !reason.startsWith("no reason"), reason);
            stranger.close();
            try (RdmaTransport clientTransport = RdmaTransport.create(fabric, strict(16, 4096))) {
                RdmaChannel channel = clientTransport.connect(server.localAddress(), new Recorder());
                channel.write(ByteBuffer.wrap(new byte[] {1, 2, 3}), true);
                awaitFrames(recorder, 1, 30);
                assertEquals(1, recorder.frames.size(), "the listener still serves our own peers");
            }
            server.close();
        }
    }

    @Test
    void transportsReleaseEveryNativeResource() throws Exception {
        RdmaResources before = RdmaResources.afterWarmUp();
        for (int round = 0; round < 2; round++) {
            try (VerbsFabric fabric = new VerbsFabric()) {
                for (int i = 0; i < 20; i++) {
                    try (Link link = new Link(fabric, strict(8, 4096))) {
                        link.client.write(ByteBuffer.wrap(new byte[100]), true);
                        link.serverChannel.write(ByteBuffer.wrap(new byte[5000]), true);
                        awaitFrames(link.atServer, 1, 30);
                        awaitFrames(link.atClient, 1, 30);
                        assertEquals(1, link.atServer.frames.size());
                        assertEquals(1, link.atClient.frames.size());
                    }
                }
            }
            RdmaResources after = RdmaResources.awaitEqual(before, 20_000);
            assertEquals(before, after, "rdma resource show counts return to where they started, round " + round);
        }
    }

    @Test
    void fullCompletionQueuesAddLoopsAndEverythingIsReleased() throws Exception {
        RdmaResources before = RdmaResources.afterWarmUp();
        // 9 receives + 8 sends reserved per connection in queues of about 64 entries: a handful of connections each
        TransportConfig config = strict(8, 4096).toBuilder().sendQueueDepth(8).completionQueueEntries(64).build();
        List<Recorder> atServer = Collections.synchronizedList(new ArrayList<>());
        try (VerbsFabric fabric = new VerbsFabric();
             RdmaTransport serverTransport = RdmaTransport.create(fabric, config);
             RdmaTransport clientTransport = RdmaTransport.create(fabric, config)) {
            RdmaServer server = serverTransport.listen(Lab.address(Lab.addr1(), Lab.freshPort()), channel -> {
                Recorder r = new Recorder();
                atServer.add(r);
                return r;
            });
            List<RdmaChannel> clients = new ArrayList<>();
            for (int i = 0; i < 16; i++) {
                clients.add(clientTransport.connect(server.localAddress(), new Recorder()));
            }
            for (int i = 0; i < clients.size(); i++) {
                clients.get(i).write(ByteBuffer.wrap(payload(i, 0, 1000)), true);
            }
            assertEquals(16, atServer.size());
            Set<String> loops = new HashSet<>();
            for (Recorder r : atServer) {
                awaitFrames(r, 1, 30);
                assertEquals(1, r.frames.size(), "every connection delivers");
                loops.addAll(r.loopThreads);
            }
            assertTrue(loops.size() >= 2, "16 connections cannot share one small completion queue: " + loops);
            assertEquals(16, serverTransport.channelCount());
        }
        RdmaResources after = RdmaResources.awaitEqual(before, 20_000);
        assertEquals(before, after, "rdma resource show counts return to where they started");
    }

    private static void sendUnchecked(RdmaChannel channel, long seed, int[] sizes) {
        try {
            send(channel, seed, sizes);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** A raw rdma_cm peer that speaks no artemis-rdma handshake. */
    private static final class ForeignPeer implements ConnectionSetup, QueuePairEvents, AutoCloseable {
        private dev.artemisrdma.transport.fabric.CompletionQueue cq;
        private QueuePair qp;

        @Override
        public QueuePairSpec queuePairSpec(FabricDevice device) throws FabricException {
            cq = device.createCompletionQueue(64);
            return new QueuePairSpec(cq, 8, 8, 1, 1, 0);
        }

        @Override
        public void prepare(QueuePair queuePair) {
            qp = queuePair;
        }

        @Override
        public void disconnected(QueuePair queuePair, String reason) {
        }

        @Override
        public void close() {
            if (qp != null) {
                qp.close();
            }
            if (cq != null) {
                cq.close();
            }
        }
    }
}
