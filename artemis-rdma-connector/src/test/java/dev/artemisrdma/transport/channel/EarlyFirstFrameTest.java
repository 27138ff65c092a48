package dev.artemisrdma.transport.channel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.time.Duration;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.Connection;
import dev.artemisrdma.transport.FakeFabric;
import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;

/**
 * The passive side hears rdma_cm's ESTABLISHED only once the peer's RTU is processed, but the peer sends as soon as
 * its connect returns. Its first frame opens the channel: what the server answers to it leaves at once, and the
 * handshake deadline does not tear down a connection whose peer has already spoken. The fake fabric refuses a send
 * on an accepted queue pair before either (a violation), as the verbs binding does.
 */
class EarlyFirstFrameTest {

    /** Answers every frame on the loop thread, inside the handler, as a broker answers a client's first packet. */
    private static final class Echo extends Peers.Recorder {
        volatile FabricException answerFailed;

        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            super.onFrame(channel, frame);
            try {
                channel.write(frame.duplicate(), true);
            } catch (FabricException e) {
                answerFailed = e;
            }
        }
    }

    private static TransportConfig strict(Duration handshakeTimeout) {
        return TransportConfig.builder().rnrRetryCount(0).busyPollMicros(0).handshakeTimeout(handshakeTimeout)
                .build();
    }

    @Test
    void theServersAnswerToTheFirstFrameLeavesBeforeRdmaCmSaysEstablished() throws Exception {
        FakeFabric fabric = new FakeFabric();
        fabric.holdPassiveEstablished(true);
        Echo server = new Echo();
        Peers.Recorder client = new Peers.Recorder();
        try (Connection c = new Connection(fabric, strict(Duration.ofSeconds(10)), strict(Duration.ofSeconds(10)),
                server, client)) {
            assertEquals(ChannelState.CONNECTING, ((RdmaChannelImpl) c.serverChannel).state(),
                    "the server has not heard ESTABLISHED before the client speaks");
            byte[] first = Peers.payload(21, 0, 200);
            c.client.write(ByteBuffer.wrap(first), true);
            Peers.await("the server's answer", 5000, () -> client.count() == 1);
            assertEquals(Peers.crc(first), client.crcs.get(0));
            assertEquals(null, server.answerFailed);
            assertEquals(ChannelState.OPEN, ((RdmaChannelImpl) c.serverChannel).state());
            assertEquals(1, fabric.establishedByPeer(), "the queue pair was told (rdma_notify on verbs)");

            assertEquals(1, fabric.deliverHeldEstablished(), "rdma_cm's event was still on its way");
            for (int i = 1; i < 50; i++) {
                c.client.write(ByteBuffer.wrap(Peers.payload(21, i, 64 + i)), true);
            }
            Peers.await("every answer", 5000, () -> client.count() == 50);
            for (int i = 1; i < 50; i++) {
                assertEquals(Peers.crc(Peers.payload(21, i, 64 + i)), client.crcs.get(i), "answer " + i);
            }
            assertTrue(c.serverChannel.isOpen(), "the late event changed nothing");
        }
    }

    @Test
    void aConnectionWhosePeerHasSpokenOutlivesTheHandshakeDeadline() throws Exception {
        FakeFabric fabric = new FakeFabric();
        fabric.holdPassiveEstablished(true);
        Echo server = new Echo();
        Peers.Recorder client = new Peers.Recorder();
        // the client's first frame must reach the server within the deadline of its accept: 300 ms was once too
        // short on a host loaded 3x over its cores (the server released the channel before the frame came)
        Duration deadline = Duration.ofMillis(1000);
        try (Connection c = new Connection(fabric, strict(deadline), strict(deadline), server, client)) {
            c.client.write(ByteBuffer.wrap(Peers.payload(22, 0, 100)), true);
            Peers.await("the server's answer", 5000, () -> client.count() == 1);
            Thread.sleep(deadline.toMillis() * 3); // past the deadline, ESTABLISHED still held
            assertTrue(c.serverChannel.isOpen(), "the deadline tore down a channel whose peer had spoken");
            assertTrue(c.client.isOpen());
            c.client.write(ByteBuffer.wrap(Peers.payload(22, 1, 100)), true);
            Peers.await("the second answer", 5000, () -> client.count() == 2);
            assertTrue(!server.closed.isDone() && !client.closed.isDone(), "neither side closed");
        }
    }

    @Test
    void aPeerThatNeverSpeaksOrCompletesTheHandshakeIsStillReleasedAtTheDeadline() throws Exception {
        FakeFabric fabric = new FakeFabric();
        fabric.holdPassiveEstablished(true);
        Peers.Recorder server = new Peers.Recorder();
        Peers.Recorder client = new Peers.Recorder();
        Duration deadline = Duration.ofMillis(300);
        try (Connection c = new Connection(fabric, strict(deadline), strict(deadline), server, client)) {
            RdmaChannelImpl serverChannel = (RdmaChannelImpl) c.serverChannel;
            Peers.await("the deadline to release the server's channel", 5000, serverChannel::isClosed);
            FabricException why = serverChannel.closeCause();
            assertTrue(why != null && why.getMessage().contains("did not complete its handshake"), String.valueOf(why));
            assertFalse(server.closed.isDone(), "never established: the application never saw it");
        }
    }
}
