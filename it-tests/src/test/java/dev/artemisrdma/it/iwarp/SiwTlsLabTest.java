package dev.artemisrdma.it.iwarp;

import static dev.artemisrdma.it.iwarp.SiwTraffic.siwBytes;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.artemisrdma.artemis.LinkReport;
import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.Lab;
import dev.artemisrdma.it.TlsStores;
import dev.artemisrdma.it.artemis.LabBroker;
import dev.artemisrdma.it.wire.TlsProbeMain;
import dev.artemisrdma.it.wire.WireJmsMain;
import dev.artemisrdma.transport.stats.TransportStats;

/**
 * TLS over soft-iWARP (issue 38), in {@link SiwLabTest}'s lab: siw has no immediate data, so every fragment's header
 * travels in band, TLS records among them. A JMS client with a client certificate at a TLS acceptor that needs one is
 * served (messages of 1 B to 1 MiB, transactions) while the broker's connections are TLS channels whose wires sent no
 * immediate data, and siw's TCP connections carried at least the messages' bytes; a client without a certificate is
 * refused, saying why, as over rxe.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class SiwTlsLabTest {

    @BeforeAll
    static void onSiw() throws Exception {
        SiwLabTest.onSiw();
    }

    @Test
    void jmsOverTlsIsServedAndAClientWithoutACertificateRefusedOverSiw() throws Exception {
        int plainPort = Lab.freshPort();
        int tlsPort = Lab.freshPort();
        int count = 200;
        Map<String, String> acceptor = new LinkedHashMap<>(TlsStores.acceptor("broker", true));
        acceptor.put("port", Integer.toString(tlsPort));
        acceptor.put("sslHandshakeTimeout", "60"); // a cold JVM's first handshake, interpreted under emulation
        String url = "rdma://" + Lab.addr0() + ":" + tlsPort + "?connectTimeout=60000";
        long before = siwBytes(tlsPort);
        try (LabBroker broker = LabBroker.start(Lab.addr0(), plainPort, java.nio.file.Files.createTempDirectory(
                "siw-tls"), false, 0, Map.of(), Map.of("rdma-tls", acceptor));
             JavaProcess client = JavaProcess.driven("siw-tls-jms", WireJmsMain.class).jvm("-Xmx768m").keepOutput()
                     .start(url + TlsStores.query("client"), "siw.tls", Integer.toString(count), "38")) {
            client.await("PROGRESS", 300);
            // while the client is connected: its connections are TLS channels whose wires sent no immediate data
            Map<String, Integer> sessions = LinkReport.tlsSessions(broker.server());
            List<TransportStats> wires = LinkReport.rdmaStats(broker.server());
            String result = client.await("RESULT", 300);
            long carried = siwBytes(tlsPort) - before;
            System.out.println("siw lab JMS over TLS: " + result + "; sessions " + sessions + "; siw's TCP sent "
                    + carried + " bytes; the broker's wires " + wires);
            Map<String, Long> r = SiwLabTest.Results.parse(result);
            assertEquals(count, r.get("received") - r.get("duplicated"), result);
            assertEquals(0, r.get("lost") + r.get("bad") + r.get("failures"), result);
            assertTrue(sessions.keySet().stream().anyMatch(s -> s.startsWith("rdma TLS")), "no TLS session at the "
                    + "broker: " + sessions);
            assertFalse(wires.isEmpty(), "the broker held no RDMA connection while the client ran");
            assertTrue(wires.stream().allMatch(w -> w.immediateSends() == 0), "siw has no immediate data: " + wires);
            assertTrue(wires.stream().mapToLong(TransportStats::framesReceived).sum() > 0, "no frame in: " + wires);
            assertTrue(carried >= r.get("bytes"), "siw's TCP connections on port " + tlsPort + " sent " + carried
                    + " bytes for " + r.get("bytes") + " bytes of messages: " + result);
            try (JavaProcess refused = JavaProcess.driven("siw-tls-refused", TlsProbeMain.class).jvm("-Xmx256m")
                    .keepOutput().start(url + TlsStores.query(null), "siw.tls.refused")) {
                String verdict = refused.awaitLine(l -> l.startsWith("SERVED") || l.startsWith("REFUSED")
                        || l.startsWith("BROKEN"), 120_000);
                assertTrue(refused.awaitExitOrKill(30), "the probe did not exit");
                String all = String.join("\n", refused.keptSince(0));
                System.out.println("siw lab: a client without a certificate: " + all.lines()
                        .filter(l -> l.contains("cannot connect")).findFirst().orElse(verdict));
                assertTrue(verdict != null && verdict.startsWith("REFUSED"), all);
                assertTrue(all.contains("certificate_required") || all.contains("bad_certificate"),
                        "the refused client does not say why: " + all);
            }
        }
    }
}
