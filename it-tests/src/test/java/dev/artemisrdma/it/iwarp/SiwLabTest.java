package dev.artemisrdma.it.iwarp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static dev.artemisrdma.it.iwarp.SiwTraffic.sh;
import static dev.artemisrdma.it.iwarp.SiwTraffic.siwBytes;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.Lab;
import dev.artemisrdma.it.TransportSoakLabTest;
import dev.artemisrdma.it.artemis.LabBroker;
import dev.artemisrdma.it.pairs.PairsReplicationLabTest;
import dev.artemisrdma.it.wire.WireJmsMain;
import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.stats.TransportStats;
import dev.artemisrdma.transport.verbs.VerbsFabric;
import dev.artemisrdma.verbs.RdmaDevice;
import dev.artemisrdma.verbs.RdmaDevices;

/**
 * The transport on soft-iWARP ({@code rdma-lab run --fabric siw}: siw0 and siw1 where rxe0 and rxe1 were, no rxe at
 * all): a device with no immediate data, 80 inline bytes, 6 scatter-gather entries and no RNR retry (a SEND that
 * finds no receive ends the connection), whose queue pairs run over kernel TCP sockets. The default configuration
 * creates its queue pairs there (inline fitted from 256 to what siw allows); frames of every kind, JMS (with large
 * messages and transactions) and a replicated pair pass. siw has no hardware counters: the proof that it carried the
 * traffic is its TCP connections' byte counts ({@code ss -tin}) on the acceptor's port, beside rdma_cm's ids on siw.
 * The transport soak runs over siw too ({@link #theTransportSoakPassesOverSiwWithEveryHeaderInBand}); JMS over TLS:
 * {@link SiwTlsLabTest}; older builds and Artemis releases: {@code CompatibilityLabTest} in the siw lab.
 */
@Timeout(value = 900, unit = TimeUnit.SECONDS)
class SiwLabTest {

    @BeforeAll
    static void onSiw() throws IOException, InterruptedException {
        String links = sh("rdma link show");
        assertTrue(links.contains("link siw0/1") && links.contains("link siw1/1"), "this group runs in the "
                + "soft-iWARP lab (rdma-lab run --fabric siw): " + links);
        assertFalse(links.contains("rxe"), "rxe devices would take the connections: " + links);
    }

    @Test
    void siwIsIwarpWithEightyInlineBytesAndTheDefaultsAreFittedToIt() throws Exception {
        try (RdmaDevices devices = RdmaDevices.open()) {
            RdmaDevice siw0 = devices.all().stream().filter(d -> d.name().equals("siw0")).findFirst()
                    .orElseThrow(() -> new AssertionError("no siw0 among " + devices.names()));
            assertEquals(1, siw0.transportType(), "IBV_TRANSPORT_IWARP");
            assertFalse(siw0.supportsImmediateData());
            assertEquals(80, siw0.maxInlineData(), "SIW_MAX_INLINE, found by asking the device");
            assertEquals(6, siw0.maxSge());
            System.out.printf("siw lab: %s: iWARP, %d inline bytes, %d SGEs, %d SRQs of %d, max_qp_wr %d%n",
                    siw0.name(), siw0.maxInlineData(), siw0.maxSge(), siw0.maxSrq(), siw0.maxSrqWr(), siw0.maxQpWr());
        }
    }

    @Test
    void framesOfEveryKindCrossSiwWithTheirHeadersInBand() throws Exception {
        int port = Lab.freshPort();
        TransportConfig defaults = TransportConfig.defaults();
        Peers.Recorder atServer = new Peers.Recorder();
        Peers.Recorder atClient = new Peers.Recorder();
        long sentBefore = siwBytes(port);
        try (VerbsFabric fabric = new VerbsFabric();
             RdmaTransport server = RdmaTransport.create(fabric, defaults);
             RdmaTransport client = RdmaTransport.create(fabric, defaults)) {
            CompletableFuture<RdmaChannel> accepted = new CompletableFuture<>();
            RdmaServer listening = server.listen(Lab.address(Lab.addr0(), port), ch -> {
                accepted.complete(ch);
                return atServer;
            });
            RdmaChannel c = client.connect(new InetSocketAddress(Lab.addr0(), port), atClient);
            RdmaChannel s = accepted.get(30, TimeUnit.SECONDS);
            String ids = sh("rdma resource show cm_id");
            assertTrue(ids.contains("siw0") && ids.contains(":" + port), "rdma_cm ids on siw: " + ids);
            int[] sizes = {1, 30, 72, 80, 81, 200, 4_000, 16_384, 100_000, 1 << 20, 3 << 20, 7};
            List<Long> crcs = new ArrayList<>();
            long payload = 0;
            for (int i = 0; i < sizes.length; i++) {
                byte[] frame = Peers.payload(36, i, sizes[i]);
                crcs.add(Peers.crc(frame));
                payload += 2L * frame.length;
                boolean flush = i == sizes.length - 1 || sizes[i] > 100; // small ones unflushed: packed
                c.write(ByteBuffer.wrap(frame), flush);
                s.write(ByteBuffer.wrap(frame), flush);
            }
            Peers.await("every frame at both ends", 120_000,
                    () -> atServer.count() == sizes.length && atClient.count() == sizes.length);
            assertEquals(crcs, atServer.crcs, "frames at the server, in order and intact");
            assertEquals(crcs, atClient.crcs, "frames at the client, in order and intact");
            TransportStats cs = c.stats();
            TransportStats ss = s.stats();
            assertEquals(0, cs.immediateSends() + ss.immediateSends(), "siw has no immediate data: " + cs);
            assertTrue(cs.inlineSends() > 0 && cs.framesPacked() > 0, "small frames went inline and packed: " + cs);
            long carried = siwBytes(port) - sentBefore;
            System.out.printf("siw lab: %d frames each way (%d payload bytes in all) over siw's TCP connections, "
                    + "which sent %d bytes; client %s%n", sizes.length, payload, carried, cs);
            assertTrue(carried >= payload, "siw's TCP connections on port " + port + " sent " + carried
                    + " bytes, fewer than the " + payload + " bytes of payload: the traffic did not go over siw");
            listening.close();
        }
    }

    @Test
    void jmsWithLargeMessagesAndTransactionsPassesOverSiw() throws Exception {
        int port = Lab.freshPort();
        long before = siwBytes(port);
        try (LabBroker broker = LabBroker.start(Lab.addr0(), port, java.nio.file.Files.createTempDirectory("siw"),
                false, 0);
             JavaProcess client = JavaProcess.driven("siw-jms", WireJmsMain.class).jvm("-Xmx768m").keepOutput()
                     .start("rdma://" + Lab.addr0() + ":" + port, "siw.jms", "600", "36")) {
            String result = client.await("RESULT", 600);
            System.out.println("siw lab JMS: " + result);
            Map<String, Long> r = Results.parse(result);
            assertEquals(600, r.get("received") - r.get("duplicated"), result);
            assertEquals(0, r.get("lost") + r.get("bad") + r.get("failures"), result);
            long carried = siwBytes(port) - before;
            assertTrue(carried >= r.get("bytes"), "siw's TCP connections on port " + port + " sent " + carried
                    + " bytes for " + r.get("bytes") + " bytes of messages: " + result);
        }
    }

    @Test
    void aReplicatedPairFailsOverExactlyOnceOverSiw() throws Exception {
        long failover = new PairsReplicationLabTest().run(false, null, Lab.addr0(), Lab.addr1(), null);
        System.out.println("siw lab: replicated pair, client without a broker for " + failover + " ms");
    }

    /**
     * The transport soak ({@link TransportSoakLabTest}) over siw: {@code -Dsiw.soak.frames} frames (CI 100,000), a
     * mix of small, fragmented and 16 MiB frames both ways at once. siw has no RNR retry at all, so a single SEND into
     * a receive we did not post ends the connection, which fails the soak: credits are exact with every header in band.
     */
    @Test
    void theTransportSoakPassesOverSiwWithEveryHeaderInBand() throws Exception {
        int port = Lab.freshPort();
        TransportSoakLabTest.Outcome<Long> soaked = TransportSoakLabTest.soak(TransportSoakLabTest.strict(),
                Lab.addr1(), port, Long.getLong("siw.soak.frames", 100_000), () -> siwBytes(port));
        long carried = soaked.after() - soaked.before();
        System.out.printf("siw lab soak: siw's TCP connections on port %d sent %,d bytes for %,d payload bytes; "
                + "client %s; server %s%n", port, carried, soaked.payload(), soaked.client(), soaked.server());
        assertEquals(0, soaked.client().immediateSends() + soaked.server().immediateSends(),
                "siw has no immediate data: every fragment's header went in band");
        assertTrue(soaked.client().framesPerDataSend() > 0 && soaked.client().framesPacked() > 0,
                "small frames were packed: " + soaked.client());
        assertTrue(carried >= soaked.payload(), "siw's TCP connections on port " + port + " sent " + carried
                + " bytes, fewer than the " + soaked.payload() + " bytes of payload: the soak did not go over siw");
    }

    /** {@code RESULT key=value ...} of {@link WireJmsMain}. */
    static final class Results {
        static Map<String, Long> parse(String line) {
            Map<String, Long> values = new java.util.LinkedHashMap<>();
            for (String kv : line.substring("RESULT ".length()).trim().split(" ")) {
                String[] p = kv.split("=");
                values.put(p[0], Math.round(Double.parseDouble(p[1])));
            }
            return values;
        }
    }
}
