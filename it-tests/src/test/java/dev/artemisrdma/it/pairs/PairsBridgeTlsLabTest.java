package dev.artemisrdma.it.pairs;

import static dev.artemisrdma.it.pairs.PairBroker.props;
import static dev.artemisrdma.it.pairs.PairsClusterLabTest.elapsedMillis;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.it.Lab;
import dev.artemisrdma.it.RdmaResources;
import dev.artemisrdma.it.RxeHwCounters;
import dev.artemisrdma.it.TlsStores;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A core bridge over TLS over RDMA (issue 38), from {@code config/pairs/bridge-source.xml} and
 * {@code bridge-target.xml} with Artemis's TLS keys added as broker properties, as a user adds them: site B's RDMA
 * acceptor has sslEnabled and needClientAuth (broker.p12, trust.p12); site A's bridge connector {@code target} has
 * sslEnabled and presents broker.p12 (signed by the CA B trusts). Every durable message sent to A reaches B once, the
 * bridge's link is a TLS channel over RDMA (B's own connection table) and the rxe devices' packet counters moved with
 * it. Then a site A whose bridge connector has only other.p12 (a CA B does not trust) is refused at B's handshake:
 * its messages stay on A, none reaches B, and B says why (an empty client certificate chain: the JDK offers no
 * certificate whose CA the server's request does not name). A's own acceptor stays plain (its clients are not the
 * point here).
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class PairsBridgeTlsLabTest {

    private static final int MESSAGES = Integer.getInteger("pairs.bridge.tls.messages", 400);
    private static final int UNTRUSTED_MESSAGES = 20;
    private static final int UNTRUSTED_SEQ = 1_000_000;

    @Test
    void aBridgeWithATrustedCertificateMovesEachMessageOnceOverTlsAndAnUntrustedOneIsRefused() throws Exception {
        RdmaResources baseline = PairsLab.baseline();
        int portA = Lab.freshPort();
        int portB = Lab.freshPort();
        int portUntrusted = Lab.freshPort();
        Path data = Files.createTempDirectory("pairs-bridge-tls");
        byte[] body = Arrays.copyOf("bridged over TLS".getBytes(java.nio.charset.StandardCharsets.US_ASCII), 1024);
        String clientTls = TlsStores.query("client") + "&connectTimeout=60000";
        RxeHwCounters before = RxeHwCounters.now();
        try (PairBroker b = PairBroker.start("site-b-tls", "bridge-target.xml", data.resolve("b"), false,
                targetProperties(portB))) {
            long start = System.nanoTime();
            try (PairBroker a = PairBroker.start("site-a-tls", "bridge-source.xml", data.resolve("a"), false,
                    sourceProperties(portA, portB, "broker"))) {
                Map<String, String> linked = b.await("the bridge connected over TLS", r -> Integer.parseInt(
                        r.get("peerSessionsRdma")) >= 1 && Integer.parseInt(r.get("inboundTls")) >= 1, 180);
                System.out.println("bridge linked in " + elapsedMillis(start) + " ms: " + linked);
                send(portA, body, 0, MESSAGES);
                Set<Integer> received = new TreeSet<>();
                List<Integer> duplicates = new ArrayList<>();
                receive(portB, clientTls, MESSAGES, body, received, duplicates);
                System.out.printf("%d messages of %d B bridged over TLS over RDMA in %d ms%n", received.size(),
                        body.length, elapsedMillis(start));
                assertEquals(List.of(), duplicates, "messages delivered twice");
                assertEquals(MESSAGES, received.size(), "messages lost: " + received.size() + " of " + MESSAGES);
                Map<String, String> target = b.report();
                // A forgets a message once B's confirmation of it is back: moments after the consumer had it
                Map<String, String> source = a.await("A's queue emptied", r -> "0".equals(r.get("queuedMessages")), 60);
                System.out.println("site A: " + source);
                PairsClusterLabTest.assertLinksOnRdma(target, MESSAGES);
                // every connection B accepted is TLS: the bridge's, and the consumer's
                assertEquals(target.get("inboundRdma"), target.get("inboundTls"), "a plain connection at B: " + target);
                assertTrue(Long.parseLong(target.get("bytesIn")) >= (long) MESSAGES * body.length,
                        "B's RDMA connections carried fewer bytes in than the messages: " + target);
                assertEquals("target:RdmaConnectorFactory", source.get("connectors"));
                RxeHwCounters moved = RxeHwCounters.now().since(before);
                System.out.println("rxe counters moved: " + moved.nonZero());
                // each message's bytes crossed twice (A to B by the bridge, B to the consumer), in packets of at most
                // 4096 bytes (RoCE's largest MTU), however many frames a send packed
                long fewest = 2L * MESSAGES * body.length / 4096;
                assertTrue(moved.get("sent_pkts") >= fewest && moved.get("rcvd_pkts") >= fewest, "the rxe devices "
                        + "sent or received fewer than the " + fewest + " packets the bridged bytes need: "
                        + moved.nonZero());
                PairsLab.assertNoNettyAttempt(a, b);
            }
            int logMark = b.log().length(); // what B says from here on is about the untrusted bridge
            try (PairBroker untrusted = PairBroker.start("site-a-untrusted", "bridge-source.xml",
                    data.resolve("a-untrusted"), false, sourceProperties(portUntrusted, portB, "other"))) {
                send(portUntrusted, body, UNTRUSTED_SEQ, UNTRUSTED_MESSAGES);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
                while (!b.log().substring(logMark).contains("TLS handshake with") && System.nanoTime() < deadline) {
                    Thread.sleep(500);
                }
                Thread.sleep(3_000); // the bridge retries every 2 s at most: each try refused the same way
                String refusal = b.log().substring(logMark).lines().filter(l -> l.contains("TLS handshake with"))
                        .findFirst().orElse("(none)");
                String refused = untrusted.log().lines().filter(l -> l.contains("cannot connect to")).findFirst()
                        .orElse("(none)");
                Map<String, String> target = b.report();
                Map<String, String> source = untrusted.report();
                System.out.println("an untrusted bridge: B said " + refusal + "; its site said " + refused + "; B "
                        + target + "; A " + source);
                assertTrue(refused.contains("bad_certificate"), "the untrusted site did not say why: " + refused);
                // the JDK's key manager offers no certificate whose CA B's certificate request does not name: B
                // sees none (as Netty's acceptor does, AMQ222208 "Empty client certificate chain")
                assertTrue(refusal.contains("Empty client certificate chain"),
                        "B did not refuse the untrusted bridge saying why: " + refusal);
                assertEquals("0", target.get("peerSessionsRdma"), "the untrusted bridge has a session at B");
                assertEquals("0", target.get("queuedMessages"), "the untrusted bridge's messages reached B: " + target);
                assertEquals(Integer.toString(UNTRUSTED_MESSAGES), source.get("queuedMessages"),
                        "the untrusted bridge's messages did not stay on its site: " + source);
                PairsLab.assertNoNettyAttempt(untrusted);
            }
        } finally {
            PairsLab.deleteTree(data);
        }
        PairsLab.assertResourcesBack(baseline);
    }

    /** Site B: its RDMA acceptor speaks TLS only and needs a client certificate that trust.p12 trusts. */
    private static Map<String, String> targetProperties(int port) {
        Map<String, String> p = new HashMap<>(props("rdma.host", Lab.addr1(), "rdma.port", "" + port));
        TlsStores.acceptor("broker", true).forEach((k, v) -> p.put(
                PairBrokerMain.PROPERTY + "acceptorConfigurations.rdma.params." + k, v));
        // a cold JVM's first handshake runs the JDK's elliptic-curve code interpreted under emulation
        p.put(PairBrokerMain.PROPERTY + "acceptorConfigurations.rdma.params.sslHandshakeTimeout", "60");
        return p;
    }

    /** Site A: a plain acceptor; its bridge connector {@code target} speaks TLS and presents {@code key}.p12. */
    private static Map<String, String> sourceProperties(int port, int targetPort, String key) {
        Map<String, String> p = new HashMap<>(props("rdma.host", Lab.addr0(), "rdma.port", "" + port,
                "rdma.peer.host", Lab.addr1(), "rdma.peer.port", "" + targetPort));
        TlsStores.connector(key).forEach((k, v) -> p.put(
                PairBrokerMain.PROPERTY + "connectorConfigurations.target.params." + k, v));
        p.put(PairBrokerMain.PROPERTY + "connectorConfigurations.target.params.connectTimeout", "60000");
        return p;
    }

    private static void send(int port, byte[] body, int firstSeq, int count) throws Exception {
        try (ActiveMQConnectionFactory onA = RdmaConnectionFactories.create("rdma://" + Lab.addr0() + ":" + port);
             Connection toA = onA.createConnection()) {
            Session session = toA.createSession(true, Session.SESSION_TRANSACTED);
            Queue queue = session.createQueue("bridge.orders");
            MessageProducer producer = session.createProducer(queue);
            producer.setDeliveryMode(DeliveryMode.PERSISTENT);
            for (int i = 0; i < count; i++) {
                BytesMessage m = session.createBytesMessage();
                m.writeBytes(body);
                m.setIntProperty("seq", firstSeq + i);
                producer.send(m);
                if ((i + 1) % 50 == 0) {
                    session.commit();
                }
            }
            session.commit();
        }
    }

    private static void receive(int port, String tls, int count, byte[] body, Set<Integer> received,
                                List<Integer> duplicates) throws Exception {
        try (ActiveMQConnectionFactory onB = RdmaConnectionFactories.create("rdma://" + Lab.addr1() + ":" + port
                + "?" + tls.substring(1));
             Connection toB = onB.createConnection()) {
            toB.start();
            Session session = toB.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer consumer = session.createConsumer(session.createQueue("bridge.orders"));
            PairsLab.receiveEachOnce(consumer, count, received, duplicates, m -> assertTrue(
                    Arrays.equals(body, ((BytesMessage) m).getBody(byte[].class)),
                    "message " + m.getIntProperty("seq") + " came with another body"));
        }
    }
}
