package dev.artemisrdma.it.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.it.Lab;
import dev.artemisrdma.transport.wire.FrameHeader;
import dev.artemisrdma.transport.wire.Handshake;
import dev.artemisrdma.verbs.RdmaDevices;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 10's hostile-peer suite on the real rxe fabric. A broker in its own JVM ({@code -Xmx1g}) serves an RDMA
 * acceptor with small bounds; raw verbs peers ({@link RawVerbsPeer}: not our transport) complete a valid handshake
 * and then claim huge frames, send endless fragments, garbage headers, zero-length SENDs, more SENDs than credits and
 * credit floods; others offer bogus handshake values, or connect and never complete the handshake, several at once.
 * After each attack: the broker closed each attacker's connection (the attacker sees it go) and logged why, naming
 * the attacker; a well-behaved JMS client is served over RDMA (the acceptor's transport counters rise); the broker's
 * heap after a full GC and the memory its process has registered (the kernel's count) stayed within the bounds; and
 * once the attackers are gone the broker process's RDMA kernel objects are back to their baseline. One broker
 * lifetime for everything (CI budget).
 */
@Timeout(value = 400, unit = TimeUnit.SECONDS)
class HostileLabTest {

    private static final long REASSEMBLY_MEMORY = 512 << 10;
    private static final int MAX_REASSEMBLY = 256 << 10;
    private static final long MAX_REGISTERED = 16 << 20;
    private static final String BOUNDS = "maxReassemblyBytes=256k&reassemblyMemory=512k&reassemblyTimeout=10s"
            + "&handshakeTimeout=2s&maxRegisteredMemory=16m&receiveSlots=32";
    private HostileBroker broker;
    private AttackedBroker attacked;
    private RdmaDevices devices;
    private ActiveMQConnectionFactory client;
    private String host;
    private int port;

    @Test
    void hostilePeersFailOnlyTheirOwnConnectionsAndTheBrokerServesOnWithinItsBounds() throws Exception {
        host = Lab.addr0();
        port = Lab.freshPort();
        try (HostileBroker b = HostileBroker.start(host, port, Files.createTempDirectory("hostile"), BOUNDS);
             RdmaDevices d = RdmaDevices.open();
             ActiveMQConnectionFactory cf = RdmaConnectionFactories.create("rdma://" + host + ":" + port
                     + "?reconnectAttempts=0")) {
            broker = b;
            devices = d;
            client = cf;
            attacked = new AttackedBroker(b, cf, MAX_REGISTERED);
            try {
                attacked.wellBehavedClientIsServed("warm-up"); // the broker's completion loop and send slabs exist
                attacked.largeMessagesServed("warm-up", 1, 300 << 10); // and the send slab of large buffers (held frames)
                attacked.baseline(REASSEMBLY_MEMORY);

                hugeFrameClaims();
                endlessFragments();
                heldFramesHitTheReassemblyBudgetAndTheirDeadline();
                garbageHeaders();
                zeroLengthAndHeaderlessSends();
                moreSendsThanCredits();
                creditFlood();
                bogusHandshakeValues();
                handshakesNeverCompleted();

                Map<String, Long> end = broker.heap();
                attacked.figure("end", "heap after GC " + mib(end.get("heapAfterGc")) + " (peak after any GC "
                        + mib(end.get("peakHeapAfterGc")) + ", -Xmx " + mib(end.get("heapMax"))
                        + "); protocol errors " + end.get("protocolErrors") + ", refused "
                        + end.get("connectionsRefused") + ", accepted " + end.get("connectionsAccepted"));
            } finally {
                attacked.printSummary("HostileLabTest", "reassemblyMemory " + mib(REASSEMBLY_MEMORY)
                        + ", maxRegisteredMemory " + mib(MAX_REGISTERED));
            }
        }
    }

    // ------------------------------------------------------------------------------------------------- attacks

    private void hugeFrameClaims() throws Exception {
        List<RawVerbsPeer> peers = connected(3);
        int payload = peers.get(0).fragmentPayload();
        peers.get(0).send(RawVerbsPeer.frame(FrameHeader.FIRST, 0, 60 << 20, payload), true);
        peers.get(1).send(RawVerbsPeer.frame(FrameHeader.FIRST, 0, Integer.MAX_VALUE, payload), true);
        peers.get(2).send(RawVerbsPeer.frame(FrameHeader.FIRST, 0, -1, payload), true);
        verdict("huge frame claims", peers, "exceeds maxReassemblyBytes", "exceeds the maximum frame size",
                "frame of -1 bytes");
    }

    private void endlessFragments() throws Exception {
        List<RawVerbsPeer> peers = connected(1);
        RawVerbsPeer p = peers.get(0);
        int payload = p.fragmentPayload();
        p.fragment(true, false, 128 << 10, payload);
        int offset = payload;
        try {
            for (int i = 0; i < 1000; i++) { // never LAST: past the frame's end the server must stop it
                p.fragment(false, false, offset, payload);
                offset += payload;
            }
            fail("the server took 1000 fragments of a 128 KiB frame");
        } catch (IllegalStateException dropped) {
            // connection gone while sending: what the server should do
        }
        verdict("endless fragments", peers, "fragments do not add up");
    }

    private void heldFramesHitTheReassemblyBudgetAndTheirDeadline() throws Exception {
        List<RawVerbsPeer> peers = connected(2);
        int payload = peers.get(0).fragmentPayload();
        int fragments = MAX_REASSEMBLY / payload; // all but the last fragment of a frame of maxReassemblyBytes
        for (RawVerbsPeer p : peers) {
            for (int i = 0; i < fragments; i++) {
                p.fragment(i == 0, false, i == 0 ? MAX_REASSEMBLY : i * payload, payload);
            }
        }
        Map<String, Long> held = broker.heap(); // while the two squatters' frames hold the whole reassemblyMemory
        attacked.checkBounds("held frames (while held)", held);
        // a well-behaved client's large messages go in chunks of about 100 KiB, each a fragmented frame that needs
        // reassembly room: the squatter above its fair share that began first is failed to make it, not the client
        // (before the fair-share rule the client's connection was failed, whichever connection it was)
        attacked.largeMessagesServed("while squatters hold the reassembly memory", 3, 300 << 10);
        verdict("held frames", peers, "fair share", "reassemblyTimeout");
    }

    private void garbageHeaders() throws Exception {
        List<RawVerbsPeer> peers = connected(3);
        peers.get(0).send(RawVerbsPeer.frame(0, 0, 0, 64), true);
        peers.get(1).send(RawVerbsPeer.frame(FrameHeader.PACKED | FrameHeader.FIRST, 0, 1, 64), true);
        peers.get(2).send(RawVerbsPeer.frame(FrameHeader.FIRST | FrameHeader.LAST, 0, 1000, 64), true);
        verdict("garbage headers", peers, "continuation fragment without a first one", "packed SEND with flags",
                "frame says 1000 bytes, carries 64");
    }

    private void zeroLengthAndHeaderlessSends() throws Exception {
        List<RawVerbsPeer> peers = connected(2);
        peers.get(0).send(new byte[0], true);
        peers.get(1).send(new byte[] {1, 2, 3}, true);
        verdict("zero-length and headerless sends", peers, "SEND of 0 bytes has no frame header",
                "SEND of 3 bytes has no frame header");
    }

    private void moreSendsThanCredits() throws Exception {
        // the peer says it posted 2 receives and never returns credit, so the broker can send it two credit frames
        // at most; then 500 SENDs (credit frames of its own: no payload, no credit) on the 33 credits it was offered
        // and what those two frames returned. Those beyond the broker's free receives wait (RNR, retried); those that
        // land in receives the broker reposted but could not yet grant are the violation it sees.
        RawVerbsPeer p = RawVerbsPeer.open(devices, host, port);
        List<RawVerbsPeer> peers = List.of(p);
        p.connect(Handshake.encodeConnect(new Handshake.Params(RawVerbsPeer.SLOT, 2, 4096, 0)));
        p.burst(RawVerbsPeer.frame(FrameHeader.CREDIT, 0, 0, 0), 500);
        verdict("more SENDs than credits", peers, "beyond the receive credits it was granted");
    }

    private void creditFlood() throws Exception {
        List<RawVerbsPeer> peers = connected(1);
        peers.get(0).send(RawVerbsPeer.frame(FrameHeader.CREDIT, FrameHeader.MAX_CREDITS, 0, 0), true);
        verdict("credit flood", peers, "granted 65535 credits");
    }

    private void bogusHandshakeValues() throws Exception {
        byte[] badVersion = RawVerbsPeer.honestHandshake();
        ByteBuffer.wrap(badVersion).putShort(4, (short) 99);
        byte[] foreign = new byte[24];
        java.util.Arrays.fill(foreign, (byte) 0x5A);
        Map<String, byte[]> bogus = new LinkedHashMap<>();
        bogus.put("receive slot size 1073741824", Handshake.encodeConnect(new Handshake.Params(1 << 30, 32, 4096)));
        bogus.put("initial credits 1000000", Handshake.encodeConnect(new Handshake.Params(4096, 1_000_000, 4096)));
        bogus.put("maximum frame size 16", Handshake.encodeConnect(new Handshake.Params(4096, 32, 16)));
        bogus.put("unsupported protocol version 99", badVersion);
        bogus.put("magic 0x5a5a5a5a", foreign);
        bogus.put("magic 0x00000000", new byte[0]); // no handshake at all: rdma_cm pads the request with zeros
        Map<String, Long> before = broker.stats();
        for (Map.Entry<String, byte[]> e : bogus.entrySet()) {
            try (RawVerbsPeer p = RawVerbsPeer.open(devices, host, port)) {
                try {
                    p.connect(e.getValue());
                    fail("a connect request with " + e.getKey() + " was accepted");
                } catch (RawVerbsPeer.Rejected rejected) {
                    assertTrue(rejected.getMessage().contains(e.getKey()), "the reject's reason says what was wrong: "
                            + rejected.getMessage());
                }
                String from = p.localAddress();
                String line = broker.awaitLine(l -> l.contains("rejected connection from " + from)
                        && l.contains(e.getKey()), 10_000);
                assertNotNull(line, "the broker logged no refusal of " + from + " for " + e.getKey());
            }
        }
        long refused = broker.stats().get("connectionsRefused") - before.get("connectionsRefused");
        assertEquals(bogus.size(), refused, "connection requests refused");
        attacked.afterAttack("bogus handshake values", bogus.size() + " connect requests refused with their reason");
    }

    private void handshakesNeverCompleted() throws Exception {
        int n = 6;
        List<RawVerbsPeer> peers = new ArrayList<>();
        try {
            for (int i = 0; i < n; i++) {
                RawVerbsPeer p = RawVerbsPeer.open(devices, host, port);
                peers.add(p);
                p.connectAndHold(RawVerbsPeer.honestHandshake());
            }
            // while they hold: a queue pair on each side and the broker's registered memory for each, within
            // maxRegisteredMemory
            long deadline = System.currentTimeMillis() + 10_000;
            KernelRdmaObjects holding = KernelRdmaObjects.now();
            while (holding.counts().get("qp") < attacked.baseline().counts().get("qp") + 2 * n
                    && System.currentTimeMillis() < deadline) {
                Thread.sleep(20);
                holding = KernelRdmaObjects.now();
            }
            attacked.figure("handshakes never completed (while held)", holding.toString());
            KernelRdmaObjects baseline = attacked.baseline();
            assertEquals(baseline.counts().get("qp") + 2 * n, holding.counts().get("qp"), "queue pairs while held");
            assertTrue(holding.foreignRegisteredBytes() > baseline.foreignRegisteredBytes(), "the broker registered "
                    + "nothing for the held connections: " + holding);
            attacked.notePeakRegistered(holding.foreignRegisteredBytes());
            assertTrue(holding.foreignRegisteredBytes() <= MAX_REGISTERED, "registered while held: " + holding);
            for (RawVerbsPeer p : peers) {
                String from = p.localAddress();
                assertNotNull(broker.awaitLine(l -> l.contains("from " + from) && l.contains("did not complete its "
                        + "handshake within 2000 ms (raise handshakeTimeout)"), 15_000),
                        "the broker did not release the never-established connection from " + from);
            }
        } finally {
            peers.forEach(RawVerbsPeer::close);
        }
        attacked.afterAttack("handshakes never completed", n + " connections released after handshakeTimeout");
    }

    // --------------------------------------------------------------------------------------------- the checks

    /** {@code n} raw peers with an honest handshake, accepted by the broker. */
    private List<RawVerbsPeer> connected(int n) throws Exception {
        List<RawVerbsPeer> peers = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            RawVerbsPeer p = RawVerbsPeer.open(devices, host, port);
            peers.add(p);
            p.connect(RawVerbsPeer.honestHandshake());
        }
        return peers;
    }

    /**
     * Each attacker's connection was closed by the broker, which logged why ({@code reasons[i]}, with attacker i's
     * address); then the checks after every attack.
     */
    private void verdict(String attack, List<RawVerbsPeer> peers, String... reasons) throws Exception {
        try {
            for (int i = 0; i < peers.size(); i++) {
                RawVerbsPeer p = peers.get(i);
                String from = p.localAddress();
                String reason = reasons[i];
                assertTrue(p.awaitLost(20_000), attack + ": the broker did not close the connection of " + from);
                String line = broker.awaitLine(l -> l.contains(from) && l.contains(reason), 10_000);
                assertNotNull(line, attack + ": the broker logged no reason '" + reason + "' for " + from);
            }
        } finally {
            peers.forEach(RawVerbsPeer::close);
        }
        attacked.afterAttack(attack, peers.size() + " attacker(s) closed: " + String.join("; ", reasons));
    }

    private static String mib(long bytes) {
        return AttackedBroker.mib(bytes);
    }
}
