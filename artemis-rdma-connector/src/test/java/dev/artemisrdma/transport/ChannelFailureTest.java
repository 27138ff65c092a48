package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.api.FrameTooLargeException;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.CompletionQueue;
import dev.artemisrdma.transport.fabric.ConnectOptions;
import dev.artemisrdma.transport.fabric.ConnectionRejectedException;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.FabricListener;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairSpec;
import dev.artemisrdma.transport.fabric.WcStatus;
import dev.artemisrdma.transport.stats.ChannelCounters;
import dev.artemisrdma.transport.stats.TransportStats;
import dev.artemisrdma.transport.wire.Handshake;

/** Handshake refusals, errors, disconnects and closes, each with its cause and a clean release. */
class ChannelFailureTest {

    private static TransportConfig strict() {
        return TransportConfig.builder().sharedReceiveQueue(false).rnrRetryCount(0).busyPollMicros(0).receiveSlots(8).slotSize(1024)
                .connectTimeout(Duration.ofSeconds(5)).build();
    }

    /** A raw fabric-level connect with arbitrary private data, the way a foreign peer would come. */
    private static ConnectionRejectedException rawConnect(FakeFabric fabric, RdmaServer server, byte[] data) {
        CompletionQueue[] cq = new CompletionQueue[1];
        QueuePair[] handedOver = new QueuePair[1];
        try {
            cq[0] = fabric.device().createCompletionQueue(16);
            ConnectionSetup setup = new ConnectionSetup() {
                @Override
                public QueuePairSpec queuePairSpec(FabricDevice device) {
                    return new QueuePairSpec(cq[0], 4, 4, 2, 1, 0);
                }

                @Override
                public void prepare(QueuePair qp) {
                    handedOver[0] = qp; // ours from here on, whatever the connect's outcome
                }
            };
            return assertThrows(ConnectionRejectedException.class, () -> fabric.connect(server.localAddress(), setup,
                    new ConnectOptions(data, 0, 0, Duration.ofSeconds(5)), (qp, reason) -> { }));
        } catch (FabricException e) {
            throw new AssertionError(e);
        } finally {
            if (handedOver[0] != null) {
                handedOver[0].close();
            }
            if (cq[0] != null) {
                cq[0].close();
            }
        }
    }

    @Test
    void foreignPeersAreRejectedWithAReasonAndTheServerServesOthers() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            byte[] v9 = Handshake.encodeConnect(new Handshake.Params(1024, 9, 1 << 20));
            ByteBuffer.wrap(v9).putShort(4, (short) 9);
            assertTrue(Handshake.decodeReject(rawConnect(c.fabric, c.server, v9).rejectData())
                    .startsWith("unsupported protocol version 9"));
            assertTrue(Handshake.decodeReject(rawConnect(c.fabric, c.server, "GET / HTTP/1.1".getBytes()).rejectData())
                    .startsWith("not an artemis-rdma peer"));
            // the existing channel is undisturbed and new ones are still accepted
            Peers.Recorder second = new Peers.Recorder();
            RdmaChannel other = c.clientTransport.connect(c.server.localAddress(), second);
            other.write(ByteBuffer.wrap(new byte[] {1, 2, 3}), true);
            c.client.write(ByteBuffer.wrap(new byte[] {4}), true);
            Peers.await("frames", 5000, () -> c.serverSide.count() == 2);
            other.close();
            assertTrue(c.client.isOpen());
            // what monitoring reads: both foreign peers refused as protocol errors, our two peers accepted
            assertEquals(2, c.server.stats().protocolErrors());
            assertEquals(2, c.server.stats().refused());
            assertEquals(2, c.server.stats().accepted());
        }
    }

    @Test
    void aRejectReasonReachesTheConnectingSide() throws Exception {
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport t = RdmaTransport.create(fabric, strict())) {
            FabricListener foreign = fabric.listen(Peers.serverAddress(),
                    req -> req.reject(Handshake.encodeReject("unsupported protocol version 1")));
            FabricException e = assertThrows(FabricException.class,
                    () -> t.connect(foreign.localAddress(), new Peers.Recorder()));
            assertEquals("rejected by 10.77.0.1:" + foreign.localAddress().getPort()
                    + ": unsupported protocol version 1", e.getMessage());
            foreign.close();
        }
        assertReleased(fabric);
    }

    @Test
    void theAcceptorCanRefuse() throws Exception {
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, strict());
             RdmaTransport client = RdmaTransport.create(fabric, strict())) {
            RdmaServer s = server.listen(Peers.serverAddress(), Peers.refusing("broker is paused"));
            for (int i = 0; i < 2; i++) {
                FabricException e = assertThrows(FabricException.class,
                        () -> client.connect(s.localAddress(), new Peers.Recorder()));
                assertTrue(e.getMessage().contains("refused by the application: broker is paused"), e.getMessage());
            }
            assertEquals(0, server.channelCount());
            assertEquals(0, client.channelCount());
            assertEquals(2, s.stats().refused());
            assertEquals(0, s.stats().accepted());
            assertEquals(0, s.stats().protocolErrors(), "the application's refusals are no protocol errors");
        }
        assertReleased(fabric);
    }

    /**
     * The application's side of a connection is made only once it is established; refusing it then (returning null
     * or throwing) closes the connection: the peer, connected already, sees it fail, and nothing stays behind.
     */
    @Test
    void anApplicationThatRefusesAnEstablishedConnectionClosesIt() throws Exception {
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, strict());
             RdmaTransport client = RdmaTransport.create(fabric, strict())) {
            AtomicInteger calls = new AtomicInteger();
            RdmaServer s = server.listen(Peers.serverAddress(), ch -> {
                if (calls.incrementAndGet() == 1) {
                    return null;
                }
                throw new IllegalStateException("broker is paused");
            });
            for (int i = 0; i < 2; i++) {
                Peers.Recorder peer = new Peers.Recorder();
                try {
                    client.connect(s.localAddress(), peer);
                } catch (FabricException closedFirst) {
                    continue; // the close overtook connect's return: as good
                }
                assertNotNull(peer.closed.get(5, TimeUnit.SECONDS), "the peer hears its connection fail");
            }
            assertEquals(2, calls.get(), "asked once per established connection");
            Peers.await("the server's channels released", 5000, () -> server.channelCount() == 0);
            Peers.await("the client's channels released", 5000, () -> client.channelCount() == 0);
            assertEquals(2, s.stats().accepted(), "the requests were accepted; the application closed them after");
        }
        fabric.assertNoViolations();
    }

    @Test
    void aConnectionBiggerThanACompletionQueueIsRefusedWithAReason() throws Exception {
        // the device caps completion queues at 127 entries; a connection reserves its 65 receives and its sends
        FakeFabric small = new FakeFabric(new FakeFabric.Limits(16384, 32, 127, 256, false));
        try (RdmaTransport server = RdmaTransport.create(small, strict());
             RdmaTransport client = RdmaTransport.create(small, strict())) {
            RdmaServer s = server.listen(Peers.serverAddress(), ch -> new Peers.Recorder());
            FabricException e = assertThrows(FabricException.class,
                    () -> client.connect(s.localAddress(), new Peers.Recorder()));
            assertTrue(e.getMessage().contains("no completion queue has room")
                    && e.getMessage().contains("the device's maximum is 127): lower receiveSlots or sendQueueDepth"),
                    e.getMessage());
        }
        assertEquals(0, small.liveQueuePairs());
        assertEquals(0, small.liveCompletionQueues());
        small.assertNoViolations();
        small.close();
    }

    @Test
    void aLostPeerClosesBothSidesWithACause() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            c.fabric.breakAllConnections("link down");
            FabricException client = c.clientSide.closed.get(5, TimeUnit.SECONDS);
            FabricException server = c.serverSide.closed.get(5, TimeUnit.SECONDS);
            assertNotNull(client);
            assertNotNull(server);
            assertTrue(client.getMessage().contains("link down") && client.getMessage().contains("10.77.0.1"),
                    client.getMessage());
            assertTrue(server.getMessage().contains("link down") && server.getMessage().contains("10.77.0.2"),
                    server.getMessage());
            assertFalse(c.client.isOpen());
            assertThrows(FabricException.class, () -> c.client.write(ByteBuffer.wrap(new byte[1]), true));
        }
    }

    @Test
    void aPeerThatCloseReportsItAsTheCause() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            c.serverChannel.forceClose();
            assertNull(c.serverSide.closed.get(5, TimeUnit.SECONDS));
            FabricException cause = c.clientSide.closed.get(5, TimeUnit.SECONDS);
            assertNotNull(cause, "a peer's disconnect is a failure for Artemis");
        }
    }

    @Test
    void theFirstNonFlushErrorIsReportedWithItsMeaning() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            c.fabric.injectSendErrors(WcStatus.RETRY_EXC_ERR, 1);
            for (int i = 0; i < 5; i++) {
                try {
                    c.client.write(ByteBuffer.wrap(new byte[100]), true);
                } catch (FabricException closedAlready) {
                    break;
                }
            }
            FabricException cause = c.clientSide.closed.get(5, TimeUnit.SECONDS);
            assertNotNull(cause);
            assertTrue(cause.getMessage().contains("IBV_WC_RETRY_EXC_ERR")
                    && cause.getMessage().contains("the peer or the network is gone")
                    && cause.getMessage().contains(c.client.id()), cause.getMessage());
            assertNotNull(c.serverSide.closed.get(5, TimeUnit.SECONDS), "the server hears of the disconnect");
            // counted for monitoring by kind; the flushes that follow are completions, not errors
            ChannelCounters counted = c.client.counters();
            assertEquals(1, counted.retryErrors());
            assertEquals(0, counted.otherErrors() + counted.rnrRetryErrors());
            assertTrue(counted.completions() >= 1);
        }
    }

    @Test
    void closeDuringTrafficReleasesEverything() throws Exception {
        for (boolean force : new boolean[] {false, true}) {
            try (Connection c = new Connection(strict(), strict())) {
                CompletableFuture<Throwable> writer = CompletableFuture.supplyAsync(() -> {
                    try {
                        for (int i = 0; ; i++) {
                            c.client.write(ByteBuffer.wrap(Peers.payload(3, i, 1 + (i * 37) % 5000)), i % 3 == 0);
                            if (!c.client.isWritable()) {
                                Thread.onSpinWait();
                            }
                        }
                    } catch (Throwable t) {
                        return t;
                    }
                });
                Peers.await("traffic", 5000, () -> c.serverSide.count() > 50);
                if (force) {
                    c.client.forceClose();
                } else {
                    c.client.close();
                }
                Throwable end = writer.get(10, TimeUnit.SECONDS);
                assertTrue(end instanceof FabricException && end.getMessage().contains("is closed"), String.valueOf(end));
                assertNull(c.clientSide.closed.get(5, TimeUnit.SECONDS));
                assertNotNull(c.serverSide.closed.get(5, TimeUnit.SECONDS));
                // whatever arrived, arrived whole and in order
                for (int i = 0; i < c.serverSide.count(); i++) {
                    assertEquals(Peers.crc(Peers.payload(3, i, 1 + (i * 37) % 5000)), c.serverSide.crcs.get(i));
                }
            }
        }
    }

    @Test
    void oversizedFramesAreRefusedAndTheSmallerMaximumWins() throws Exception {
        TransportConfig small = strict().toBuilder().maxFrameSize(10_000).build();
        try (Connection c = new Connection(small, strict())) {
            FrameTooLargeException e = assertThrows(FrameTooLargeException.class,
                    () -> c.client.write(ByteBuffer.allocate(10_001), true));
            // the client's largest frame is the server's 10,000: the server's handshake said so
            assertTrue(e.getMessage().contains("exceeds the maximum frame size 10000 that the peer accepts")
                    && e.getMessage().contains("raise maxFrameSize on the peer's side"), e.getMessage());
            FrameTooLargeException own = assertThrows(FrameTooLargeException.class,
                    () -> c.serverChannel.write(ByteBuffer.allocate(10_001), true));
            assertTrue(own.getMessage().contains("10000 of this side"), own.getMessage());
            assertTrue(c.serverChannel.isOpen(), "a refused frame leaves the channel open");
            c.client.write(ByteBuffer.allocate(10_000), true);
            Peers.await("frame", 5000, () -> c.serverSide.count() == 1);
            assertThrows(IllegalArgumentException.class, () -> c.serverChannel.allocate(10_001));
            assertTrue(c.client.isOpen());
        }
    }

    @Test
    void pausedReceiverStopsTheSenderAtItsCreditsAndResumes() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            c.serverChannel.setAutoRead(false);
            int total = 50;
            for (int i = 0; i < total; i++) {
                c.client.write(ByteBuffer.wrap(Peers.payload(9, i, 10)), true);
            }
            // the window offered is 8 frames (receiveSlots); nothing beyond it may arrive while paused
            Peers.await("the window", 5000, () -> c.serverSide.count() == 8);
            Thread.sleep(50);
            assertEquals(8, c.serverSide.count(), "frames beyond the credits given");
            assertTrue(c.client.stats().creditStalls() >= 1);
            c.serverChannel.setAutoRead(true);
            Peers.await("the rest", 5000, () -> c.serverSide.count() == total);
            for (int i = 0; i < total; i++) {
                assertEquals(Peers.crc(Peers.payload(9, i, 10)), c.serverSide.crcs.get(i));
            }
        }
    }

    @Test
    void sendsAreBatchedInlinedAndSignaledSelectively() throws Exception {
        TransportConfig wide = strict().toBuilder().receiveSlots(64).build();
        try (Connection c = new Connection(wide, wide)) {
            // four unflushed 40-byte frames pack into one SEND of 8 + 4 * 44 bytes, under maxInlineData (256)
            for (int i = 0; i < 4; i++) {
                c.client.write(ByteBuffer.wrap(Peers.payload(5, i, 40)), i == 3);
            }
            Peers.await("the first four", 5000, () -> c.serverSide.count() == 4);
            TransportStats first = c.client.stats();
            assertEquals(1, first.packedSends(), first.toString());
            assertEquals(1, first.inlineSends(), "a 184-byte SEND goes inline: " + first);
            // flushed every four frames: packs of four at least (flushes behind a SEND in flight wait for it and
            // make bigger ones), posted in lists, most of them unsignaled
            for (int i = 4; i < 200; i++) {
                c.client.write(ByteBuffer.wrap(Peers.payload(5, i, 40)), i % 4 == 3);
            }
            Peers.await("frames", 5000, () -> c.serverSide.count() == 200);
            TransportStats s = c.client.stats();
            assertEquals(200, s.framesSent());
            // nothing posts a group before its writer flushed it (the loop's flushes leave it alone): 4 a SEND or more
            assertTrue(s.framesPerDataSend() >= 4, s.toString());
            assertTrue(s.signaledSends() < s.sendsPosted(), s.toString());
            assertTrue(s.postCalls() < 200, "posted in lists: " + s);
            for (int i = 0; i < 200; i++) {
                assertEquals(Peers.crc(Peers.payload(5, i, 40)), c.serverSide.crcs.get(i), "frame " + i);
            }
        }
    }

    private static void assertReleased(FakeFabric fabric) {
        try {
            assertEquals(0, fabric.liveQueuePairs());
            assertEquals(0, fabric.liveCompletionQueues());
            assertEquals(0, fabric.liveMemoryRegions());
            fabric.assertNoViolations();
        } finally {
            fabric.close();
        }
    }
}
