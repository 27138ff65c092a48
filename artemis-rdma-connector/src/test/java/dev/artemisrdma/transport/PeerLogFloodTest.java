package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.LogCapture;
import dev.artemisrdma.transport.fabric.LogLimiter;

/**
 * A flood of bad peers writes at most {@link LogLimiter#LINES} lines per log site and interval (plus a summary), not
 * one a peer: each case below used to log a line per connection. A flood that takes less than an interval meets at
 * most two of them (the sites are shared with the tests before), so at most {@link #BOUND} lines.
 */
class PeerLogFloodTest {

    private static final int FLOOD = 5 * LogLimiter.LINES;
    private static final int BOUND = 2 * LogLimiter.LINES;

    private static void assertBounded(long lines, long peers, String what) {
        assertTrue(lines <= BOUND, lines + " lines for " + peers + " " + what);
    }

    @Test
    void badHandshakesAreRejectedEachButLoggedAtMostTheLimit() throws Exception {
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, TransportConfig.defaults());
             LogCapture log = new LogCapture()) {
            RdmaServer s = server.listen(Peers.serverAddress(), ch -> new Peers.Recorder());
            for (int i = 0; i < FLOOD; i++) {
                assertThrows(FabricException.class, () -> RawPeer.connect(fabric, s.localAddress(),
                        new byte[] {1, 2, 3, 4}));
            }
            assertEquals(FLOOD, s.stats().protocolErrors(), "every bad handshake was rejected");
            assertBounded(log.count("rejected connection from"), FLOOD, "bad handshakes");
        } finally {
            fabric.close();
        }
    }

    @Test
    void refusalsByTheAcceptorAreLoggedAtMostTheLimit() throws Exception {
        FakeFabric fabric = new FakeFabric();
        TransportConfig config = TransportConfig.builder().busyPollMicros(0).build();
        try (RdmaTransport server = RdmaTransport.create(fabric, config);
             RdmaTransport client = RdmaTransport.create(fabric, config);
             LogCapture log = new LogCapture()) {
            // refused as the request arrives (the peer reads why), and refused once established (the peer is
            // closed): both a peer can repeat at will
            RdmaServer refusing = server.listen(Peers.serverAddress(), Peers.refusing("connection limit reached"));
            RdmaServer declining = server.listen(Peers.serverAddress(), ch -> null);
            for (int i = 0; i < FLOOD; i++) {
                assertThrows(FabricException.class, () -> client.connect(refusing.localAddress(),
                        new Peers.Recorder()));
                Peers.Recorder peer = new Peers.Recorder();
                try {
                    client.connect(declining.localAddress(), peer);
                    peer.closed.get(5, java.util.concurrent.TimeUnit.SECONDS);
                } catch (FabricException closedFirst) {
                    // the close overtook connect's return
                }
            }
            long failed = log.count("refused by the acceptor:");
            long onceEstablished = log.count("refused by the application once established");
            assertTrue(failed > 0 && onceEstablished > 0, "both refusals are logged (within the limit)");
            assertBounded(onceEstablished, FLOOD, "refusals once established");
            assertBounded(failed, FLOOD, "refusals with an error");
        } finally {
            fabric.close();
        }
    }

    @Test
    void handshakesThatNeverCompleteAreLoggedAtMostTheLimit() throws Exception {
        FakeFabric fabric = new FakeFabric();
        TransportConfig serverConfig = TransportConfig.builder().busyPollMicros(0)
                .handshakeTimeout(Duration.ofMillis(50)).build();
        TransportConfig clientConfig = TransportConfig.builder().busyPollMicros(0)
                .connectTimeout(Duration.ofSeconds(2)).build();
        try (RdmaTransport server = RdmaTransport.create(fabric, serverConfig);
             RdmaTransport client = RdmaTransport.create(fabric, clientConfig);
             LogCapture log = new LogCapture()) {
            RdmaServer s = server.listen(Peers.serverAddress(), ch -> new Peers.Recorder());
            fabric.stallHandshakes(true);
            List<Thread> stalled = new ArrayList<>();
            for (int i = 0; i < FLOOD; i++) {
                Thread t = new Thread(() -> assertThrows(FabricException.class,
                        () -> client.connect(s.localAddress(), new Peers.Recorder())));
                stalled.add(t);
                t.start();
            }
            for (Thread t : stalled) {
                t.join(10_000);
            }
            Peers.await("every stalled handshake released", 10_000, () -> server.channelCount() == 0);
            long expired = s.stats().accepted();
            assertTrue(expired > BOUND, "requests accepted, then expired: " + expired);
            assertBounded(log.count("did not complete its handshake within"), expired, "stalled handshakes");
        } finally {
            fabric.close();
        }
    }

    /** A server handler that fails in its callbacks other than onFrame, as an application may on a peer's doing. */
    private static final class FailingCallbacks extends Peers.Recorder {
        @Override
        public void onEndOfBatch(RdmaChannel channel) {
            throw new IllegalStateException("the application failed after the peer's frames");
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
            super.onClosed(channel, cause);
            throw new IllegalStateException("the application failed on a closed connection");
        }
    }

    /**
     * Issue 37, hole 7: a handler that fails after every batch of a peer's frames, or on every connection a peer
     * opens and closes, used to cost a log line each (RdmaChannelImpl's "handler callback failed" and "onClosed
     * failed").
     */
    @Test
    void handlerCallbacksThatFailOnAPeersDoingAreLoggedAtMostTheLimit() throws Exception {
        FakeFabric fabric = new FakeFabric();
        TransportConfig config = TransportConfig.builder().busyPollMicros(0).build();
        try (RdmaTransport server = RdmaTransport.create(fabric, config);
             RdmaTransport client = RdmaTransport.create(fabric, config);
             LogCapture log = new LogCapture()) {
            List<FailingCallbacks> handlers = new java.util.concurrent.CopyOnWriteArrayList<>();
            RdmaServer s = server.listen(Peers.serverAddress(), ch -> {
                FailingCallbacks h = new FailingCallbacks();
                handlers.add(h);
                return h;
            });
            RdmaChannel peer = client.connect(s.localAddress(), new Peers.Recorder());
            Peers.await("the server's handler", 10_000, () -> handlers.size() == 1);
            for (int i = 0; i < FLOOD; i++) {
                peer.write(java.nio.ByteBuffer.wrap(Peers.payload(37, i, 64)), true);
                int delivered = i + 1;
                // one frame a batch: each batch ends with a failing onEndOfBatch
                Peers.await("frame " + i, 10_000, () -> handlers.get(0).count() == delivered);
            }
            peer.close();
            for (int i = 1; i < FLOOD; i++) {
                RdmaChannel next = client.connect(s.localAddress(), new Peers.Recorder());
                int made = i + 1;
                // accepted (its handler made) before the peer leaves: a peer that leaves first may never be
                Peers.await("connection " + i + " accepted", 10_000, () -> handlers.size() == made);
                next.close();
                Peers.await("connection " + i + " closed on the server", 10_000,
                        () -> handlers.get(made - 1).closed.isDone());
            }
            Peers.await("every server channel gone", 10_000, () -> server.channelCount() == 0);
            long afterBatch = log.count("handler callback failed");
            long onClosed = log.count("onClosed failed");
            assertTrue(afterBatch > 0 && onClosed > 0, "both failures are logged (within the limit)");
            assertBounded(afterBatch, FLOOD, "batches the handler failed after");
            assertBounded(onClosed, FLOOD, "connections whose onClosed failed");
        } finally {
            fabric.close();
        }
    }
}
