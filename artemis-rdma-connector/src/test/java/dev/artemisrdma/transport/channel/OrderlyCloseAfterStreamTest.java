package dev.artemisrdma.transport.channel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.Connection;
import dev.artemisrdma.transport.FakeFabric;
import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;

/**
 * A stream of frames over a small window (8 receive slots, 2 KiB high-water mark) followed by an orderly close: the
 * close completes well inside closeTimeout, the peer hears the goodbye ("closed the connection", not "lost") and
 * every frame written before the close arrives. The stall this guards against: credit owed after the goodbye went
 * back in an unsignaled credit frame that nothing retired, and the close sat out closeTimeout with "0 frames
 * unsent" (a few closes in a hundred on a one-way stream, where it took the peer's credit returns landing before the
 * goodbye's completion was polled; every time when the closing side's loop is held, below).
 */
class OrderlyCloseAfterStreamTest {

    private static final int ROUNDS = 100;
    private static final int FRAMES = 200;

    private static TransportConfig config() {
        return TransportConfig.builder().sharedReceiveQueue(false).rnrRetryCount(0).busyPollMicros(0)
                .receiveSlots(8).slotSize(1024).writeHighWaterMark(2048).closeTimeout(Duration.ofSeconds(2)).build();
    }

    @Test
    void anOrderlyCloseAfterAStreamCompletesWithItsGoodbye() throws Exception {
        TransportConfig config = config();
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, config);
             RdmaTransport client = RdmaTransport.create(fabric, config)) {
            for (int round = 0; round < ROUNDS; round++) {
                oneRound(server, client, round);
            }
        } finally {
            fabric.close();
        }
        fabric.assertNoViolations();
    }

    /**
     * The close is asked while the closing side's completion loop is busy (its handler holds a frame of the peer);
     * meanwhile the peer's frames land in our receives. The loop carries the close out, goodbye included, ahead of
     * the batch that brings them (a request of another thread runs before the channel's next completions), so their
     * reposts are credit owed past the threshold after the goodbye: nothing may be sent after it (a credit frame
     * there is unsignaled, no completion would ever retire it, and the close waited for closeTimeout with 0 frames
     * unsent). Before issue 39 the closing thread posted the goodbye itself, with the same outcome to guard.
     */
    @Test
    void creditOwedAfterTheGoodbyeDoesNotHoldTheClose() throws Exception {
        TransportConfig config = config();
        Peers.HoldingRecorder clientSide = new Peers.HoldingRecorder();
        Peers.Recorder serverSide = new Peers.Recorder();
        try (Connection c = new Connection(new FakeFabric(), config, config, serverSide, clientSide)) {
            RdmaChannel client = c.client;
            RdmaChannel server = c.serverChannel;
            try {
                // the stream, through the small window
                for (int i = 0; i < FRAMES; i++) {
                    client.write(ByteBuffer.wrap(Peers.payload(7, i, 40 + (i * 37) % 400)), true);
                }
                Peers.await("the stream", 5000, () -> serverSide.count() == FRAMES);
                // the client's loop is held in its handler by the peer's first frame; four more land behind it
                server.write(ByteBuffer.wrap(Peers.payload(8, 0, 100)), true);
                assertTrue(clientSide.inHandler.await(5, TimeUnit.SECONDS), "the client's handler was never called");
                for (int i = 1; i < 5; i++) {
                    server.write(ByteBuffer.wrap(Peers.payload(8, i, 100)), true);
                }
                long goodbyes = server.stats().creditFramesReceived();
                CompletableFuture<Long> closing = CompletableFuture.supplyAsync(() -> {
                    long start = System.nanoTime();
                    client.close(); // asks the loop, which is busy: it says goodbye once the handler lets it go
                    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                });
                Peers.await("the close asked of the busy loop", 5000, ((RdmaChannelImpl) client)::commandsPending);
                Thread.sleep(100); // the peer's frames, posted before the goodbye, land in the client's receives
                clientSide.release.countDown();
                Peers.await("the goodbye at the peer", 5000,
                        () -> server.stats().creditFramesReceived() > goodbyes);
                long tookMillis = closing.get(10, TimeUnit.SECONDS);
                String state = "client " + ((RdmaChannelImpl) client).debugState() + " " + client.stats();
                assertTrue(tookMillis < 1000, "close took " + tookMillis + " ms, closeTimeout "
                        + config.closeTimeout().toMillis() + " ms: " + state);
                assertNull(clientSide.closed.get(5, TimeUnit.SECONDS), state);
                FabricException peerCause = serverSide.closed.get(5, TimeUnit.SECONDS);
                assertNotNull(peerCause, state);
                assertTrue(peerCause.getMessage().contains("closed the connection"), peerCause.getMessage());
            } finally {
                clientSide.release.countDown();
            }
        }
    }

    /**
     * The closing side's last frame spends its last credit (allowed: it returns credit the peer's frame earned), so
     * when its outbox empties it has no credit for the goodbye. It waits for the peer's credit return and then says
     * goodbye; before, once its SENDs completed it disconnected at once and the peer read a lost connection (a broker
     * logs that as a client's failure). The peer is frozen while the client gets there, then its loop is held in its
     * handler, so the client's SENDs complete before any credit can come back.
     */
    @Test
    void aSideWithNoCreditLeftWaitsForCreditToSayGoodbye() throws Exception {
        TransportConfig config = config();
        Peers.HoldingRecorder serverSide = new Peers.HoldingRecorder();
        try (Connection c = new Connection(new FakeFabric(), config, config, serverSide, new Peers.Recorder())) {
            RdmaChannelImpl client = (RdmaChannelImpl) c.client;
            try {
                Peers.await("the handshake's credit settled", 5000, () -> client.debugState().contains(" owed=0 "));
                c.fabric.freeze(c.serverChannel.localAddress());
                // 9 credits (receiveSlots + 1); lone frames, one SEND each: 8 go, the ninth waits (the last credit
                // must return credit, and the client owes none)
                for (int i = 0; i < 9; i++) {
                    c.client.write(ByteBuffer.wrap(Peers.payload(9, i, 200)), true);
                }
                // one frame of the peer's: its receive is credit owed, so the ninth goes with the last credit
                c.serverChannel.write(ByteBuffer.wrap(Peers.payload(10, 0, 100)), true);
                Peers.await("the client at no credit, its outbox empty", 5000, () -> client.debugState()
                        .contains(" credits=0 ") && client.debugState().contains(" outbox=0/"));
                CompletableFuture<Long> closing = CompletableFuture.supplyAsync(() -> {
                    long start = System.nanoTime();
                    c.client.close();
                    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                });
                Thread.sleep(50); // the close starts with no credit for its goodbye
                c.fabric.thaw(c.serverChannel.localAddress());
                assertTrue(serverSide.inHandler.await(5, TimeUnit.SECONDS), "the server's handler was never called");
                Peers.await("the client's SENDs completed", 5000, () -> client.debugState().contains(" ring=0/"));
                Thread.sleep(100); // the old close disconnected here, with no credit come back
                serverSide.release.countDown();
                long tookMillis = closing.get(10, TimeUnit.SECONDS);
                String state = "client " + client.debugState() + " " + c.client.stats();
                assertTrue(tookMillis < 1000, "close took " + tookMillis + " ms, closeTimeout "
                        + config.closeTimeout().toMillis() + " ms: " + state);
                assertNull(c.clientSide.closed.get(5, TimeUnit.SECONDS), state);
                FabricException peerCause = serverSide.closed.get(5, TimeUnit.SECONDS);
                assertNotNull(peerCause, state);
                assertTrue(peerCause.getMessage().contains("closed the connection"),
                        "the peer heard no goodbye: " + peerCause.getMessage() + "; " + state);
                assertEquals(9, serverSide.count(), state);
                for (int i = 0; i < 9; i++) {
                    assertEquals(Peers.crc(Peers.payload(9, i, 200)), serverSide.crcs.get(i), "frame " + i);
                }
            } finally {
                serverSide.release.countDown();
            }
        }
    }

    private static void oneRound(RdmaTransport serverTransport, RdmaTransport clientTransport, int round)
            throws Exception {
        Peers.Recorder serverSide = new Peers.Recorder();
        Peers.Recorder clientSide = new Peers.Recorder();
        CompletableFuture<RdmaChannel> accepted = new CompletableFuture<>();
        RdmaServer listener = serverTransport.listen(Peers.serverAddress(), ch -> {
            accepted.complete(ch);
            return serverSide;
        });
        try {
            RdmaChannel ch = clientTransport.connect(listener.localAddress(), clientSide);
            RdmaChannel serverChannel = accepted.get(5, TimeUnit.SECONDS);
            for (int i = 0; i < FRAMES; i++) {
                ch.write(ByteBuffer.wrap(Peers.payload(round, i, 40 + (i * 37) % 400)), true);
            }
            long start = System.nanoTime();
            ch.close();
            long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            String state = "round " + round + ": client " + ((RdmaChannelImpl) ch).debugState() + ", server "
                    + ((RdmaChannelImpl) serverChannel).debugState() + ", client stats " + ch.stats();
            // an orderly close waits for the goodbye's completion only: one round trip, never closeTimeout (2 s)
            assertTrue(tookMillis < 1000, "close took " + tookMillis + " ms (closeTimeout "
                    + config().closeTimeout().toMillis() + " ms): " + state);
            assertNull(clientSide.closed.get(5, TimeUnit.SECONDS), "the closing side's cause: " + state);
            FabricException peerCause = serverSide.closed.get(5, TimeUnit.SECONDS);
            assertNotNull(peerCause, state);
            assertTrue(peerCause.getMessage().contains("closed the connection"),
                    "the peer heard no goodbye: " + peerCause.getMessage() + "; " + state);
            assertEquals(FRAMES, serverSide.count(), state);
            for (int i = 0; i < FRAMES; i++) {
                assertEquals(Peers.crc(Peers.payload(round, i, 40 + (i * 37) % 400)), serverSide.crcs.get(i),
                        "round " + round + " frame " + i);
            }
        } finally {
            listener.close();
        }
    }
}
