package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

import jakarta.jms.Connection;
import jakarta.jms.JMSException;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.remoting.impl.netty.NettyAcceptorFactory;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.spi.core.protocol.RemotingConnection;
import org.apache.activemq.artemis.spi.core.remoting.Acceptor;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;

/**
 * A TCP fall-back written in the URL's fragment ({@code rdma://broker:61717#tcp://broker:61616}): every connection goes
 * over RDMA while the broker's RDMA acceptor answers, in order and not at random, and over TCP when RDMA cannot
 * connect; the broker's own connection table says which transport carried each.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class TcpFallbackTest {

    private static final String HOST = "127.0.0.1";
    private static final int PORT = 61719;
    private static final int TCP_PORT = 61729;
    /** An RDMA port where nothing listens: the fabric refuses at once, as rdma_cm does. */
    private static final int NO_RDMA_PORT = 61739;

    @TempDir
    static Path dataDir;
    private EmbeddedBroker broker;

    @BeforeAll
    void startBroker() throws Exception {
        TestRuntime.install();
        broker = EmbeddedBroker.fromBrokerXml(dataDir, HOST, PORT);
        Acceptor tcp = broker.server().getRemotingService().createAcceptor(new TransportConfiguration(
                NettyAcceptorFactory.class.getName(), Map.of("host", HOST, "port", TCP_PORT, "protocols", "CORE"),
                "tcp"));
        tcp.start();
    }

    @AfterAll
    void stopBroker() throws Exception {
        broker.close();
    }

    @Test
    void rdmaIsTriedFirstEveryTimeAndTcpOnlyWhenRdmaCannotConnect() throws Exception {
        String fallback = "#tcp://" + HOST + ":" + TCP_PORT;
        for (int i = 0; i < 6; i++) {
            // Artemis's default policy would start at a random connector: half of these would go over TCP
            assertEquals("RdmaConnection", roundTripOver("rdma://" + HOST + ":" + PORT + fallback, "fallback.rdma"));
        }
        assertEquals("NettyServerConnection",
                roundTripOver("rdma://" + HOST + ":" + NO_RDMA_PORT + fallback, "fallback.tcp"));
        // without the fall-back the same URL fails
        assertThrows(JMSException.class, () -> roundTripOver("rdma://" + HOST + ":" + NO_RDMA_PORT, "fallback.none"));
    }

    /** Sends and receives one message; returns the class of the broker-side connection that carried it. */
    private String roundTripOver(String url, String queue) throws Exception {
        Set<Object> before = broker.server().getRemotingService().getConnections().stream()
                .map(RemotingConnection::getID).collect(Collectors.toSet());
        try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create(url);
             Connection connection = cf.createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            var q = session.createQueue(queue);
            var consumer = session.createConsumer(q);
            session.createProducer(q).send(session.createTextMessage("over " + url));
            TextMessage m = (TextMessage) consumer.receive(5000);
            assertEquals("over " + url, m == null ? null : m.getText());
            List<String> kinds = broker.server().getRemotingService().getConnections().stream()
                    .filter(c -> !before.contains(c.getID())).map(RemotingConnection::getTransportConnection)
                    .map(c -> c.getClass().getSimpleName()).toList();
            assertEquals(1, kinds.size(), "the broker's new connections: " + kinds);
            return kinds.get(0);
        }
    }
}
