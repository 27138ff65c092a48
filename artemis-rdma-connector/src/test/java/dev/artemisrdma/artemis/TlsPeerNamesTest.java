package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import dev.artemisrdma.transport.fabric.LogCapture;
import jakarta.jms.Connection;
import jakarta.jms.JMSException;
import jakarta.jms.Session;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.remoting.impl.netty.NettyAcceptorFactory;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * verifyHost and sniHost decide over RDMA (the in-memory fabric) as over Artemis's Netty transport: one broker with an
 * RDMA and a Netty TLS acceptor for each of three setups (broker.p12, which names 127.0.0.1; broker-wrongname.p12,
 * which names only wrongname.invalid; broker.p12 with sniHost, the name the acceptor requires), each case connected to
 * both with the same keys: the same outcome, and a refusal's same JDK reason in the client's log. What the JDK does
 * with the two keys (Artemis hands both to its SSLEngine): with verifyHost the certificate must name the sniHost or,
 * failing that, the address dialled; an acceptor without sniHost ignores the name asked for; one with sniHost refuses
 * another name and takes a client that asks for none (one that dials an address and has no sniHost). TlsLabTest
 * runs the same cases across the two-host lab's wire.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class TlsPeerNamesTest {

    private static final String HOST = "127.0.0.1";
    private static final int PLAIN = 61811;
    private static final String SNI_NAME = "broker.artemis-rdma.test";

    @TempDir
    static Path dataDir;
    private EmbeddedBroker broker;

    /** An acceptor setup: its RDMA port, its Netty port, its key store and sniHost. */
    private enum Setup {
        NAMED(61812, 61813, "broker.p12", null),
        WRONG_NAME(61814, 61815, "broker-wrongname.p12", null),
        SNI(61816, 61817, "broker.p12", SNI_NAME);

        final int rdma;
        final int netty;
        final String keyStore;
        final String sniHost;

        Setup(int rdma, int netty, String keyStore, String sniHost) {
            this.rdma = rdma;
            this.netty = netty;
            this.keyStore = keyStore;
            this.sniHost = sniHost;
        }
    }

    @BeforeAll
    void startBroker() throws Exception {
        TestRuntime.install();
        broker = EmbeddedBroker.fromBrokerXml(dataDir, HOST, PLAIN);
        for (Setup setup : Setup.values()) {
            for (boolean rdma : new boolean[] {true, false}) {
                Map<String, Object> params = new HashMap<>(TlsEnginesTest.acceptorParams("host", HOST,
                        "port", rdma ? setup.rdma : setup.netty, "keyStorePath", TlsEnginesTest.store(setup.keyStore),
                        "sniHost", setup.sniHost));
                if (!rdma) {
                    params.put("protocols", "CORE");
                }
                broker.server().getRemotingService().createAcceptor(new TransportConfiguration(rdma
                        ? RdmaAcceptorFactory.class.getName() : NettyAcceptorFactory.class.getName(), params,
                        setup + (rdma ? "-rdma" : "-netty"))).start();
            }
        }
    }

    @AfterAll
    void stopBroker() throws Exception {
        broker.close();
    }

    @ParameterizedTest(name = "{0} {1}: refused for ''{2}''")
    @CsvSource(delimiter = '|', nullValues = "-", value = {
        "NAMED      | &sniHost=other.invalid                 | -",
        "WRONG_NAME | ''                                     | No subject alternative names matching IP address 127.0.0.1 found",
        "WRONG_NAME | &verifyHost=false                      | -",
        "WRONG_NAME | &sniHost=wrongname.invalid             | -",
        "SNI        | &sniHost=other.invalid                 | Received fatal alert: unrecognized_name",
        "SNI        | &sniHost=" + SNI_NAME + "              | -",
        "SNI        | ''                                     | -"})
    void verifyHostAndSniHostDecideAsOnNetty(Setup setup, String more, String refusedFor) {
        String query = "?reconnectAttempts=0&sslEnabled=true&keyStorePath=" + TlsEnginesTest.store("client.p12")
                + "&keyStorePassword=secureexample&keyStoreType=PKCS12&trustStorePath="
                + TlsEnginesTest.store("trust.p12") + "&trustStorePassword=secureexample&trustStoreType=PKCS12"
                + (more == null ? "" : more);
        String[] rdma = roundTrip("rdma://" + HOST + ":" + setup.rdma + query, refusedFor);
        String[] netty = roundTrip("tcp://" + HOST + ":" + setup.netty + query, refusedFor);
        String what = setup + " " + more + ": RDMA " + rdma[0] + " (reason logged: " + rdma[1] + "); Netty "
                + netty[0] + " (reason logged: " + netty[1] + ")";
        assertEquals(netty[0], rdma[0], what);
        assertEquals(refusedFor == null ? "SERVED" : "REFUSED", rdma[0], what);
        if (refusedFor != null) {
            assertTrue(Boolean.parseBoolean(rdma[1]) && Boolean.parseBoolean(netty[1]), what);
        }
    }

    /** One round trip: SERVED or REFUSED, and whether the client's log said {@code reason} meanwhile. */
    private static String[] roundTrip(String url, String reason) {
        try (LogCapture log = new LogCapture()) {
            String verdict;
            try (ActiveMQConnectionFactory cf = url.startsWith("tcp:") ? new ActiveMQConnectionFactory(url)
                    : RdmaConnectionFactories.create(url);
                 Connection connection = cf.createConnection()) {
                connection.start();
                Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
                var queue = session.createQueue("tls.names");
                var consumer = session.createConsumer(queue);
                session.createProducer(queue).send(session.createTextMessage("name"));
                verdict = consumer.receive(10_000) != null ? "SERVED" : "LOST";
            } catch (JMSException e) {
                verdict = "REFUSED";
            }
            return new String[] {verdict, Boolean.toString(reason != null && log.count(reason) > 0)};
        }
    }
}
