package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.JMSException;
import jakarta.jms.Session;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.spi.core.remoting.Acceptor;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;

/**
 * JMS over TLS over RDMA (the in-memory fabric): a broker from config/broker.xml with a plain RDMA acceptor and a TLS
 * one beside it that needs a client certificate; clients configured by URL with Artemis's Netty keys. A trusted
 * client sends and takes back messages from 1 B to 1 MiB (a large message among them); a client without a certificate,
 * a plain client at the TLS port and a TLS client at the plain port fail to connect; the plain acceptor serves on.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class TlsJmsTest {

    private static final String HOST = "127.0.0.1";
    private static final int PLAIN = 61795;
    private static final int TLS = 61796;
    private static final String PASSWORD = "secureexample";

    @TempDir
    static Path dataDir;
    private EmbeddedBroker broker;

    @BeforeAll
    void startBroker() throws Exception {
        TestRuntime.install();
        broker = EmbeddedBroker.fromBrokerXml(dataDir, HOST, PLAIN);
        Map<String, Object> params = new HashMap<>(TlsEnginesTest.acceptorParams("host", HOST, "port", TLS,
                "needClientAuth", "true"));
        Acceptor tls = broker.server().getRemotingService().createAcceptor(new TransportConfiguration(
                RdmaAcceptorFactory.class.getName(), params, "rdma-tls"));
        tls.start();
    }

    @AfterAll
    void stopBroker() throws Exception {
        broker.close();
    }

    private static String tlsUrl(int port, boolean clientCertificate) {
        String url = "rdma://" + HOST + ":" + port + "?reconnectAttempts=0&sslEnabled=true&trustStorePath="
                + TlsEnginesTest.store("trust.p12") + "&trustStorePassword=" + PASSWORD + "&trustStoreType=PKCS12";
        return clientCertificate ? url + "&keyStorePath=" + TlsEnginesTest.store("client.p12") + "&keyStorePassword="
                + PASSWORD + "&keyStoreType=PKCS12" : url;
    }

    @Test
    void aTrustedClientIsServedMessagesOfEverySize() throws Exception {
        roundTrips(tlsUrl(TLS, true), "tls.sizes");
    }

    @Test
    void clientsThatDoNotMeetTheAcceptorAreRefusedAndThePlainAcceptorServesOn() throws Exception {
        assertThrows(JMSException.class, () -> roundTrips(tlsUrl(TLS, false), "tls.no.certificate"));
        assertThrows(JMSException.class, () -> roundTrips("rdma://" + HOST + ":" + TLS + "?reconnectAttempts=0",
                "tls.plain.client"));
        assertThrows(JMSException.class, () -> roundTrips(tlsUrl(PLAIN, true), "tls.at.plain"));
        roundTrips("rdma://" + HOST + ":" + PLAIN, "plain.after");
    }

    private static void roundTrips(String url, String queue) throws Exception {
        try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create(url);
             Connection connection = cf.createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            var q = session.createQueue(queue);
            var consumer = session.createConsumer(q);
            var producer = session.createProducer(q);
            int[] sizes = {1, 1000, 20_000, 300_000, 1 << 20};
            for (int size : sizes) {
                byte[] body = new byte[size];
                for (int i = 0; i < size; i++) {
                    body[i] = (byte) (i * 31 + size);
                }
                BytesMessage m = session.createBytesMessage();
                m.writeBytes(body);
                producer.send(m);
                BytesMessage back = (BytesMessage) consumer.receive(10_000);
                byte[] got = new byte[back == null ? 0 : (int) back.getBodyLength()];
                if (back != null) {
                    back.readBytes(got);
                }
                assertEquals(size, got.length);
                assertArrayEquals(body, got);
            }
        }
    }
}
