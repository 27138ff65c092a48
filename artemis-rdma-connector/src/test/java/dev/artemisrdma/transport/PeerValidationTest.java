package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.ConnectionRejectedException;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.flow.CreditWindow;
import dev.artemisrdma.transport.wire.FrameHeader;
import dev.artemisrdma.transport.wire.Handshake;

/**
 * Issue 10 item 5: credits and handshake values from a peer are bounded and validated; a violation is a protocol
 * error that fails that connection only.
 */
class PeerValidationTest {

    @Test
    void grantsBeyondTheAdvertisedReceivesAreAProtocolErrorNeverAnOverflow() throws Exception {
        CreditWindow w = new CreditWindow(16);
        w.limit(65);
        w.grant(65);
        FabricException e = assertThrows(FabricException.class, () -> w.grant(FrameHeader.MAX_CREDITS));
        assertTrue(e.getMessage().contains("protocol error"), e.getMessage());
        // the flood of issue 10 (32,768 grants of 65,535) can never wrap the window to a negative number
        for (int i = 0; i < 32_768; i++) {
            assertThrows(FabricException.class, () -> w.grant(FrameHeader.MAX_CREDITS));
        }
        assertEquals(65, w.sendCredits());
        assertThrows(FabricException.class, () -> w.grant(-1));
    }

    @Test
    void aPeerFloodingCreditsIsDisconnectedAndTheServerServesOn() throws Exception {
        try (HostileServerFixture f = new HostileServerFixture(TransportConfig.builder().busyPollMicros(0).build());
             RawPeer peer = f.attacker()) {
            // it advertised 64 receives; a credit frame returning 65,535 is a lie
            peer.send(FrameHeader.CREDIT, FrameHeader.MAX_CREDITS, 0, new byte[0], false);
            peer.awaitLost(5000);
            String why = f.closeCause(0).getMessage();
            assertTrue(why.contains("protocol error") && why.contains("10.77.0.2"), why);
            f.assertStillServes(1000);
        }
    }

    @Test
    void aPeerSendingBeyondItsCreditsIsDisconnectedAndTheServerServesOn() throws Exception {
        // the server holds its credit back (autoRead off: back-pressure) but reposts what was consumed: a peer that
        // ignores its credits lands SENDs in receives whose credit it was never given
        TransportConfig config = TransportConfig.builder().busyPollMicros(0).receiveSlots(16).build();
        try (HostileServerFixture f = new HostileServerFixture(config);
             RawPeer peer = f.attacker()) {
            Peers.await("the server's channel", 5000, () -> !f.channels.isEmpty());
            f.channels.get(0).setAutoRead(false);
            peer.burst(200, 10); // 200 SENDs on 17 credits
            peer.awaitLost(5000);
            String why = f.closeCause(0).getMessage();
            assertTrue(why.contains("protocol error") && why.contains("beyond the receive credits it was granted")
                    && why.contains("10.77.0.2"), why);
            f.assertStillServes(1000);
        }
    }

    @Test
    void bogusHandshakeValuesAreRefusedWithTheReason() throws Exception {
        int[][] bogus = {
            {1 << 30, 64, 64 << 20},           // receive slots of 1 GiB
            {16 << 10, 1_000_000, 64 << 20},   // more credits than a 16-bit credit field can ever return
            {16 << 10, 64, 16},                // a max frame so small that every Artemis write would be refused
            {16 << 10, 64, Integer.MIN_VALUE},
        };
        try (HostileServerFixture f = new HostileServerFixture(TransportConfig.builder().busyPollMicros(0).build())) {
            for (int[] v : bogus) {
                byte[] handshake = Handshake.encodeConnect(new Handshake.Params(v[0], v[1], v[2]));
                ConnectionRejectedException e = assertThrows(ConnectionRejectedException.class,
                        () -> f.attacker(handshake).close());
                String reason = Handshake.decodeReject(e.rejectData());
                assertTrue(reason.contains("invalid handshake"), reason);
            }
            assertEquals(0, f.accepted.size(), "no channel was offered to the application");
            f.assertStillServes(1000);
        }
    }

    @Test
    void aServerAcceptingATinyMaxFrameIsRefusedByTheClient() throws Exception {
        byte[] tiny = Handshake.encodeAccept(new Handshake.Params(16 << 10, 64, 100));
        Handshake.HandshakeException h = assertThrows(Handshake.HandshakeException.class,
                () -> Handshake.decodeAccept(tiny));
        assertTrue(h.getMessage().contains("maximum frame size 100"), h.getMessage());
    }
}
