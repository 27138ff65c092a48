package dev.artemisrdma.artemis;

import static dev.artemisrdma.artemis.TlsEnginesTest.acceptorParams;
import static dev.artemisrdma.artemis.TlsEnginesTest.connectorParams;
import static dev.artemisrdma.artemis.TlsEnginesTest.handshake;
import static dev.artemisrdma.artemis.TlsEnginesTest.store;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.HashMap;
import java.util.Map;

import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLException;

import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.config.impl.ConfigurationImpl;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.spi.core.protocol.ProtocolManager;
import org.apache.activemq.artemis.spi.core.remoting.Connector;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The TLS of RDMA acceptors and connectors ({@link TlsEngines} in {@link RdmaAcceptor} and {@link RdmaConnector}):
 * refused settings name the endpoint and the key, an acceptor's reload swaps its stores for new connections, a plain
 * and a TLS acceptor share one transport, and a TLS acceptor whose stores cannot be used is left out of a broker that
 * starts all the same. The handshake over RDMA itself is the transport's (its own tests).
 */
class TlsEndpointsTest {

    @TempDir
    Path dir;

    @BeforeAll
    static void runtime() {
        TestRuntime.install();
    }

    private static InetSocketAddress peer() {
        return new InetSocketAddress("127.0.0.1", 40_000);
    }

    private static SSLEngine connectorEngine() {
        return TlsEngines.connector(connectorParams()).newEngine(null);
    }

    private static String refusal(Class<? extends RuntimeException> type, Runnable making) {
        return assertThrows(type, making::run).getMessage();
    }

    @Test
    void factoriesRefuseTlsErrorsNamingTheEndpointAndTheKey() {
        String why = refusal(IllegalArgumentException.class, () -> new RdmaAcceptorFactory().createAcceptor("tls",
                null, acceptorParams("keyStorePassword", "wrong"), null, null, null, null,
                Map.of("CORE", dummyCore()), "g", null));
        assertTrue(why.startsWith("RDMA acceptor 'tls': keyStorePassword does not open key store"), why);
        why = refusal(IllegalArgumentException.class, () -> new RdmaAcceptorFactory().createAcceptor("tls", null,
                acceptorParams("trustAll", "true"), null, null, null, null, Map.of("CORE", dummyCore()), "g", null));
        assertTrue(why.contains("unknown parameter 'trustAll'"), "trustAll is a connector key: " + why);
        why = refusal(IllegalArgumentException.class, () -> new RdmaConnectorFactory().createConnector(
                connectorParams("verifyHost", "yes"), null, null, null, null, null, null));
        assertTrue(why.startsWith("RDMA connector: verifyHost: expected true or false"), why);
        why = refusal(IllegalArgumentException.class, () -> new RdmaConnectorFactory().createConnector(
                connectorParams("needClientAuth", "true"), null, null, null, null, null, null));
        assertTrue(why.contains("unknown parameter 'needClientAuth'"), "needClientAuth is an acceptor key: " + why);
    }

    // ---- reload ------------------------------------------------------------------------------------------------------

    @Test
    void reloadMakesNewConnectionsUseTheNewStoresAndKeepsEstablishedOnes() throws Exception {
        Path keyStore = dir.resolve("broker.p12");
        Files.copy(Path.of(store("broker.p12")), keyStore);
        RdmaAcceptor acceptor = (RdmaAcceptor) new RdmaAcceptorFactory().createAcceptor("tls", null,
                acceptorParams("keyStorePath", keyStore.toString()), null, null, null, null,
                Map.of("CORE", dummyCore()), "g", null);
        TlsEngines tls = acceptor.tls();
        SSLEngine before = tls.newEngine(peer());
        SSLContext first = tls.context();

        Files.copy(Path.of(store("other.p12")), keyStore, StandardCopyOption.REPLACE_EXISTING);
        acceptor.reload();
        assertNotSame(first, tls.context());
        handshake(connectorEngine(), before); // made before the reload: the old certificate, still trusted
        assertThrows(SSLException.class, () -> handshake(connectorEngine(), tls.newEngine(peer())),
                "a new connection presents the new certificate, which the client does not trust");

        // stores that cannot be used: refused naming the key, the current context kept
        Files.write(keyStore, new byte[] {1, 2, 3});
        SSLContext current = tls.context();
        String why = refusal(IllegalStateException.class, acceptor::reload);
        assertTrue(why.startsWith("RDMA acceptor 'tls': TLS reload failed: keyStorePath '" + keyStore), why);
        assertSame(current, tls.context());
    }

    @Test
    void anAcceptorWithoutTlsHasNothingToReload() {
        RdmaAcceptor acceptor = (RdmaAcceptor) new RdmaAcceptorFactory().createAcceptor("plain", null,
                Map.of("host", "127.0.0.1"), null, null, null, null, Map.of("CORE", dummyCore()), "g", null);
        assertNull(acceptor.tls());
        acceptor.reload();
    }

    // ---- the broker and the shared transport -------------------------------------------------------------------------

    @Test
    void rdmaUrlsCarryTheTlsKeysToEveryConnector() {
        try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create("rdma://localhost:61700?sslEnabled=true"
                + "&trustStorePath=tls/trust.p12&trustStorePassword=secureexample&verifyHost=false"
                + "&reconnectAttempts=2#rdma://[::1]:61701")) {
            assertEquals(2, cf.getReconnectAttempts());
            for (TransportConfiguration tc : cf.getStaticConnectors()) {
                assertEquals("true", tc.getParams().get("sslEnabled"));
                assertEquals("tls/trust.p12", tc.getParams().get("trustStorePath"));
                assertEquals("false", tc.getParams().get("verifyHost"));
            }
        }
        String why = refusal(IllegalArgumentException.class,
                () -> RdmaConnectionFactories.create("rdma://localhost?sslEnabled=true&needClientAuth=true"));
        assertTrue(why.contains("'needClientAuth'"), why);
    }

    @Test
    void tlsIsNotPartOfTheSharedTransportsKey() {
        Map<String, Object> plain = Map.of("host", "127.0.0.1", "receiveSlots", "32");
        Map<String, Object> tls = acceptorParams("receiveSlots", "32", "needClientAuth", "true");
        assertEquals(RdmaParameters.parse("plain", plain, RdmaParameters.ACCEPTOR_KEYS),
                RdmaParameters.parse("tls", tls, RdmaParameters.ACCEPTOR_KEYS),
                "a plain and a TLS acceptor with the same tuning share one transport");
        assertEquals(RdmaParameters.connectorParams(plain), RdmaParameters.connectorParams(tls),
                "the stores of the broker are not handed to its clients");
    }

    @Test
    void aTlsAcceptorWhoseStoresCannotBeUsedIsLeftOutAndTheBrokerStarts() throws Exception {
        Configuration config = EmbeddedBroker.testable(new ConfigurationImpl(), dir);
        config.addAcceptorConfiguration(new TransportConfiguration(RdmaAcceptorFactory.class.getName(),
                new HashMap<>(Map.of("host", "127.0.0.1", "port", 61731)), "plain"));
        config.addAcceptorConfiguration(new TransportConfiguration(RdmaAcceptorFactory.class.getName(),
                acceptorParams("port", 61732, "keyStorePath", dir.resolve("missing.p12").toString()), "tls"));
        try (EmbeddedBroker broker = EmbeddedBroker.start(config, null)) {
            assertTrue(broker.server().isActive(), "a TLS error of one acceptor stopped the broker");
            assertTrue(broker.server().getRemotingService().getAcceptor("plain").isStarted());
            assertNull(broker.server().getRemotingService().getAcceptor("tls"), "refused acceptor was created");
        }
    }

    @Test
    void aConnectorWhoseStoresCannotBeUsedMakesNoConnection() {
        Connector connector = new RdmaConnectorFactory().createConnector(
                connectorParams("trustStorePath", dir.resolve("missing.p12").toString()), null, null,
                Runnable::run, Runnable::run, null, null);
        connector.start(); // logs "TLS cannot be set up: trustStorePath '...' cannot be read"
        try {
            assertFalse(connector.isStarted());
            assertNull(connector.createConnection());
        } finally {
            connector.close();
        }
    }


    private static ProtocolManager dummyCore() {
        return (ProtocolManager) java.lang.reflect.Proxy.newProxyInstance(ProtocolManager.class.getClassLoader(),
                new Class<?>[] {ProtocolManager.class}, (proxy, method, args) -> null);
    }
}
