package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.fabric.LogCapture;
import dev.artemisrdma.transport.tls.TlsChannel;
import jakarta.jms.Connection;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import org.apache.activemq.artemis.api.core.SimpleString;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.spi.core.protocol.RemotingConnection;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A core bridge over TLS over RDMA (the in-memory fabric), from {@code config/pairs/bridge-source.xml} and
 * {@code bridge-target.xml} with Artemis's TLS keys added as broker properties: site B's acceptor needs a client
 * certificate, site A's bridge connector presents broker.p12. Every message reaches B once over a TLS channel; a site
 * whose bridge connector has only other.p12 (a CA B does not trust) is refused at B's handshake, saying why, and its
 * messages stay where they are. (The JDK's key manager offers no certificate whose CA the server's certificate
 * request does not name, so B sees an empty chain rather than an untrusted one, as on Netty.) PairsBridgeTlsLabTest runs the same as processes on rxe.
 */
class BridgeOverTlsTest {

    private static final String HOST = "127.0.0.1";
    private static final int PORT_A = 61821;
    private static final int PORT_B = 61822;
    private static final int PORT_UNTRUSTED = 61823;
    private static final int MESSAGES = 200;
    /** What B's acceptor logs when the bridge has no certificate that B's trust store's CA signed. */
    private static final String REFUSAL = "failed: Empty client certificate chain";

    @TempDir
    Path dir;

    @Test
    void aTrustedBridgeMovesEachMessageOnceOverTlsAndAnUntrustedOneIsRefused() throws Exception {
        TestRuntime.install();
        String clientTls = "?sslEnabled=true&keyStorePath=" + TlsEnginesTest.store("client.p12")
                + "&keyStorePassword=secureexample&keyStoreType=PKCS12&trustStorePath="
                + TlsEnginesTest.store("trust.p12") + "&trustStorePassword=secureexample&trustStoreType=PKCS12";
        try (EmbeddedBroker b = site("bridge-target.xml", "b", PORT_B, "acceptorConfigurations.rdma.params.",
                Map.of("keyStorePath", "broker.p12", "needClientAuth", "true"))) {
            try (EmbeddedBroker a = site("bridge-source.xml", "a", PORT_A, "connectorConfigurations.target.params.",
                    Map.of("keyStorePath", "broker.p12"))) {
                send(PORT_A, 0, MESSAGES);
                List<Integer> received = new ArrayList<>();
                try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create("rdma://" + HOST + ":" + PORT_B
                        + clientTls);
                     Connection connection = cf.createConnection()) {
                    connection.start();
                    Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
                    MessageConsumer consumer = session.createConsumer(session.createQueue("bridge.orders"));
                    Message m;
                    while (received.size() < MESSAGES && (m = consumer.receive(10_000)) != null) {
                        received.add(m.getIntProperty("seq"));
                    }
                    assertEquals(null, consumer.receive(500), "a message beyond the bridged ones");
                }
                List<Integer> expected = new ArrayList<>();
                for (int i = 0; i < MESSAGES; i++) {
                    expected.add(i);
                }
                assertEquals(expected, received, "each bridged message once, in order");
                assertFalse(tlsChannels(b.server()).isEmpty(), "the bridge's link at B is no TLS channel");
                assertEquals(0, queued(a.server()), "messages left on A");
            }
            // site A is gone; its bridge's link at B goes once B has read the close, usually within 100 ms, but once
            // in about a dozen loaded runs it outlived A by more than 20 s (not yet explained): the untrusted site's
            // check below counts only connections that were not at B before it, and this wait is reported, not failed
            long closedAt = System.nanoTime();
            long gone = closedAt + TimeUnit.SECONDS.toNanos(5);
            while (tlsChannels(b.server()).size() > 0 && System.nanoTime() < gone) {
                Thread.sleep(50);
            }
            Set<Object> before = tlsChannels(b.server());
            System.out.println("site A's bridge link at B: " + (before.isEmpty() ? "went" : "still there, channel open "
                    + openTlsChannels(b.server())) + " " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - closedAt)
                    + " ms after site A was closed");
            try (LogCapture log = new LogCapture();
                 EmbeddedBroker untrusted = site("bridge-source.xml", "untrusted", PORT_UNTRUSTED,
                         "connectorConfigurations.target.params.", Map.of("keyStorePath", "other.p12"))) {
                send(PORT_UNTRUSTED, 1_000, 20);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                // the JDK's key manager offers only a certificate whose CA the server's request names: none here
                while (log.count(REFUSAL) == 0 && System.nanoTime() < deadline) {
                    Thread.sleep(50);
                }
                assertTrue(log.count(REFUSAL) > 0, "B did not say why it refused");
                Thread.sleep(1_000); // a retry or two of the bridge's
                Set<Object> added = tlsChannels(b.server());
                added.removeAll(before);
                assertEquals(Set.of(), added, "the untrusted bridge has a connection at B");
                assertEquals(0, queued(b.server()), "the untrusted bridge's messages reached B");
                assertEquals(20, queued(untrusted.server()), "the untrusted bridge's messages left its site");
            }
        }
    }

    /**
     * {@code config/pairs/FILE} on 127.0.0.1 ({@code rdma.peer.port} B's), with sslEnabled and the test stores
     * under {@code prefix} as broker properties, {@code keys} over them (store names resolved).
     */
    private EmbeddedBroker site(String file, String name, int port, String prefix, Map<String, String> keys)
            throws Exception {
        Configuration config = EmbeddedBroker.testable(EmbeddedBroker.read("pairs/" + file, Map.of(
                "broker.name", name, "rdma.host", HOST, "rdma.port", Integer.toString(port),
                "rdma.peer.host", HOST, "rdma.peer.port", Integer.toString(PORT_B))), dir.resolve(name));
        StringBuilder properties = new StringBuilder();
        Map<String, String> all = new java.util.LinkedHashMap<>(Map.of("sslEnabled", "true",
                "keyStorePassword", "secureexample", "keyStoreType", "PKCS12",
                "trustStorePath", TlsEnginesTest.store("trust.p12"), "trustStorePassword", "secureexample",
                "trustStoreType", "PKCS12"));
        keys.forEach((k, v) -> all.put(k, k.equals("keyStorePath") ? TlsEnginesTest.store(v) : v));
        all.forEach((k, v) -> properties.append(prefix).append(k).append('=').append(v).append('\n'));
        Path written = dir.resolve(name + ".properties");
        Files.writeString(written, properties);
        return EmbeddedBroker.start(config, written.toString());
    }

    private static void send(int port, int firstSeq, int count) throws Exception {
        try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create("rdma://" + HOST + ":" + port);
             Connection connection = cf.createConnection()) {
            Session session = connection.createSession(true, Session.SESSION_TRANSACTED);
            MessageProducer producer = session.createProducer(session.createQueue("bridge.orders"));
            for (int i = 0; i < count; i++) {
                Message m = session.createTextMessage("order " + (firstSeq + i));
                m.setIntProperty("seq", firstSeq + i);
                producer.send(m);
            }
            session.commit();
        }
    }

    /** Whether each of {@code server}'s TLS-over-RDMA connections still has its channel open (for the report). */
    private static List<Boolean> openTlsChannels(ActiveMQServer server) {
        List<Boolean> open = new ArrayList<>();
        for (RemotingConnection c : server.getRemotingService().getConnections()) {
            if (c.getTransportConnection() instanceof RdmaConnection r && r.channel() instanceof TlsChannel t) {
                open.add(t.isOpen());
            }
        }
        return open;
    }

    /** The ids of {@code server}'s connections that run over TLS over RDMA. */
    private static Set<Object> tlsChannels(ActiveMQServer server) {
        Set<Object> tls = new HashSet<>();
        for (RemotingConnection c : server.getRemotingService().getConnections()) {
            if (c.getTransportConnection() instanceof RdmaConnection r && r.channel() instanceof TlsChannel) {
                tls.add(c.getID());
            }
        }
        return tls;
    }

    private static long queued(ActiveMQServer server) throws Exception {
        var queue = server.locateQueue(SimpleString.of("bridge.orders"));
        return queue == null ? 0 : queue.getMessageCount();
    }
}
