package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URISyntaxException;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import javax.net.ssl.SNIHostName;
import javax.net.ssl.SNIMatcher;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLEngineResult.HandshakeStatus;
import javax.net.ssl.SSLException;

import org.apache.activemq.artemis.utils.DefaultSensitiveStringCodec;
import org.junit.jupiter.api.Test;

/**
 * {@link TlsEngines} from acceptor and connector maps, as Artemis's Netty transport reads the same keys: engine modes
 * and flags, defaults, masked passwords, refusals that name the key, and handshakes between an acceptor's and a
 * connector's engines over heap buffers (no RDMA) with the stores of {@code src/test/resources/tls}.
 */
class TlsEnginesTest {

    private static final String PASSWORD = "secureexample";

    /** The path of a store of {@code src/test/resources/tls}. */
    static String store(String name) {
        try {
            return Path.of(TlsEnginesTest.class.getResource("/tls/" + name).toURI()).toString();
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    /** {@code base} with {@code keyValues} put over it (a null value takes the key out). */
    private static Map<String, Object> with(Map<String, Object> base, Object... keyValues) {
        Map<String, Object> params = new HashMap<>(base);
        for (int i = 0; i < keyValues.length; i += 2) {
            if (keyValues[i + 1] == null) {
                params.remove((String) keyValues[i]);
            } else {
                params.put((String) keyValues[i], keyValues[i + 1]);
            }
        }
        return params;
    }

    /** A TLS acceptor with the broker's key store and the test CA as trust. */
    static Map<String, Object> acceptorParams(Object... keyValues) {
        return with(Map.of("host", "127.0.0.1", "port", 61700, "sslEnabled", "true",
                "keyStorePath", store("broker.p12"), "keyStorePassword", PASSWORD, "keyStoreType", "PKCS12",
                "trustStorePath", store("trust.p12"), "trustStorePassword", PASSWORD, "trustStoreType", "PKCS12"),
                keyValues);
    }

    /** A TLS connector to localhost with the client's key store and the test CA as trust. */
    static Map<String, Object> connectorParams(Object... keyValues) {
        return with(Map.of("host", "localhost", "port", 61700, "sslEnabled", "true",
                "keyStorePath", store("client.p12"), "keyStorePassword", PASSWORD, "keyStoreType", "PKCS12",
                "trustStorePath", store("trust.p12"), "trustStorePassword", PASSWORD, "trustStoreType", "PKCS12"),
                keyValues);
    }

    private static SSLEngine acceptorEngine(Object... keyValues) {
        return TlsEngines.acceptor(acceptorParams(keyValues)).newEngine(peer());
    }

    private static SSLEngine connectorEngine(Object... keyValues) {
        return TlsEngines.connector(connectorParams(keyValues)).newEngine(new InetSocketAddress("127.0.0.1", 61700));
    }

    private static InetSocketAddress peer() {
        try {
            return new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 40_000);
        } catch (UnknownHostException e) {
            throw new IllegalStateException(e);
        }
    }

    private static String refusal(Class<? extends RuntimeException> type, Runnable making) {
        return assertThrows(type, making::run).getMessage();
    }

    // ---- off -------------------------------------------------------------------------------------------------------

    @Test
    void sslEnabledFalseOrAbsentGivesNoEngines() {
        assertNull(TlsEngines.acceptor(Map.of("host", "h")));
        assertNull(TlsEngines.connector(Map.of("host", "h")));
        // stores are not read without TLS, as Netty: a path that does not exist is no error
        assertNull(TlsEngines.acceptor(acceptorParams("sslEnabled", "FALSE", "keyStorePath", "/nowhere.p12")));
        assertNull(TlsEngines.connector(connectorParams("sslEnabled", false, "trustStorePath", "/nowhere.p12")));
    }

    // ---- engines as Netty sets them up -----------------------------------------------------------------------------

    @Test
    void acceptorEnginesHaveArtemisDefaults() {
        TlsEngines tls = TlsEngines.acceptor(acceptorParams());
        assertEquals(Duration.ofSeconds(10), tls.handshakeTimeout(), "DEFAULT_SSL_HANDSHAKE_TIMEOUT");
        SSLEngine engine = tls.newEngine(peer());
        assertFalse(engine.getUseClientMode());
        assertFalse(engine.getNeedClientAuth());
        assertFalse(engine.getWantClientAuth());
        assertNull(engine.getSSLParameters().getEndpointIdentificationAlgorithm(), "DEFAULT_ACCEPTOR_VERIFY_HOST");
        assertTrue(engine.getSSLParameters().getSNIMatchers() == null
                || engine.getSSLParameters().getSNIMatchers().isEmpty());
        assertEquals("127.0.0.1", engine.getPeerHost(), "the peer's address, as NettyAcceptor");
        assertEquals(40_000, engine.getPeerPort());
        SSLEngine plain = tls.context().createSSLEngine();
        plain.setUseClientMode(false);
        assertEquals(List.of(plain.getEnabledProtocols()), List.of(engine.getEnabledProtocols()));
        assertArrayEquals(plain.getEnabledCipherSuites(), engine.getEnabledCipherSuites());
    }

    @Test
    void connectorEnginesHaveArtemisDefaultsAndTheConfiguredTarget() {
        TlsEngines tls = TlsEngines.connector(connectorParams("host", "[::1]", "port", 61799));
        assertEquals(Duration.ofSeconds(10), tls.handshakeTimeout(), "Netty's SslHandler default");
        assertEquals(Duration.ofSeconds(45), TlsEngines.connector(connectorParams("connectTimeout", "45s"))
                .handshakeTimeout(), "a connector's handshake gets its connectTimeout");
        SSLEngine engine = tls.newEngine(new InetSocketAddress("127.0.0.1", 1));
        assertTrue(engine.getUseClientMode());
        assertTrue(engine.getWantClientAuth(), "NettyConnector sets wantClientAuth");
        assertEquals("HTTPS", engine.getSSLParameters().getEndpointIdentificationAlgorithm(),
                "DEFAULT_CONNECTOR_VERIFY_HOST is true");
        assertEquals("::1", engine.getPeerHost(), "the configured host, as NettyConnector");
        assertEquals(61799, engine.getPeerPort());
        assertNull(TlsEngines.connector(connectorParams("verifyHost", "false")).newEngine(null)
                .getSSLParameters().getEndpointIdentificationAlgorithm());
    }

    @Test
    void clientAuthenticationNeededElseWanted() {
        SSLEngine need = acceptorEngine("needClientAuth", "true");
        assertTrue(need.getNeedClientAuth());
        SSLEngine want = acceptorEngine("wantClientAuth", "True");
        assertTrue(want.getWantClientAuth());
        assertFalse(want.getNeedClientAuth());
        SSLEngine both = acceptorEngine("needClientAuth", true, "wantClientAuth", true);
        assertTrue(both.getNeedClientAuth(), "needClientAuth wins, as NettyAcceptor");
    }

    @Test
    void protocolsAndCipherSuitesAreSet() {
        String suite = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256";
        SSLEngine acceptor = acceptorEngine("enabledProtocols", "TLSv1.2", "enabledCipherSuites", suite);
        assertArrayEquals(new String[] {"TLSv1.2"}, acceptor.getEnabledProtocols());
        assertArrayEquals(new String[] {suite}, acceptor.getEnabledCipherSuites());
        SSLEngine connector = connectorEngine("enabledProtocols", "TLSv1.3, TLSv1.2",
                "enabledCipherSuites", "TLS_AES_128_GCM_SHA256, " + suite);
        assertEquals(List.of("TLSv1.3", "TLSv1.2"), List.of(connector.getEnabledProtocols()));
        assertEquals(List.of("TLS_AES_128_GCM_SHA256", suite), List.of(connector.getEnabledCipherSuites()));
        // suites alone: the engine's own protocols are set again, as Netty does
        SSLEngine suitesOnly = acceptorEngine("enabledCipherSuites", suite);
        assertEquals(List.of(acceptorEngine().getEnabledProtocols()), List.of(suitesOnly.getEnabledProtocols()));
    }

    @Test
    void sslv3AndSslv2HelloAreTakenOutOnTheAcceptorOnly() {
        SSLEngine acceptor = acceptorEngine("enabledProtocols", "TLSv1.2,SSLv3,SSLv2Hello");
        assertEquals(List.of("TLSv1.2"), List.of(acceptor.getEnabledProtocols()));
        SSLEngine connector = connectorEngine("enabledProtocols", "TLSv1.2,SSLv3");
        assertTrue(List.of(connector.getEnabledProtocols()).contains("SSLv3"), "NettyConnector does not strip");
        String why = refusal(IllegalStateException.class,
                () -> TlsEngines.acceptor(acceptorParams("enabledProtocols", "SSLv3")));
        assertTrue(why.startsWith("enabledProtocols 'SSLv3': nothing is left"), why);
    }

    @Test
    void verifyHostIsHttpsEndpointIdentification() {
        assertEquals("HTTPS", acceptorEngine("verifyHost", "true").getSSLParameters()
                .getEndpointIdentificationAlgorithm());
        assertEquals("HTTPS", connectorEngine().getSSLParameters().getEndpointIdentificationAlgorithm());
    }

    @Test
    void sniHostIsTheAcceptorsMatcherAndTheConnectorsServerName() {
        List<SNIMatcher> matchers = acceptorEngine("sniHost", "broker\\.example").getSSLParameters()
                .getSNIMatchers().stream().toList();
        assertEquals(1, matchers.size());
        assertTrue(matchers.get(0).matches(new SNIHostName("broker.example")));
        assertFalse(matchers.get(0).matches(new SNIHostName("other.example")));
        assertEquals(List.of(new SNIHostName("broker.example")),
                connectorEngine("sniHost", "broker.example").getSSLParameters().getServerNames());
        String why = refusal(IllegalArgumentException.class,
                () -> TlsEngines.connector(connectorParams("sniHost", "-bad..name")));
        assertTrue(why.startsWith("sniHost: '-bad..name' is not a host name"), why);
        why = refusal(IllegalArgumentException.class, () -> TlsEngines.acceptor(acceptorParams("sniHost", "(")));
        assertTrue(why.startsWith("sniHost: '(' is not a host name pattern"), why);
    }

    @Test
    void engineSetUpIsTheSameForEveryConnection() {
        TlsEngines tls = TlsEngines.acceptor(acceptorParams("needClientAuth", "true"));
        SSLContext context = tls.context();
        for (int i = 0; i < 3; i++) {
            assertTrue(tls.newEngine(peer()).getNeedClientAuth());
        }
        assertSame(context, tls.context(), "the context is made once, not per connection");
    }

    // ---- passwords -------------------------------------------------------------------------------------------------

    private static String masked(String password) throws Exception {
        DefaultSensitiveStringCodec codec = new DefaultSensitiveStringCodec();
        codec.init(new HashMap<>());
        return codec.encode(password);
    }

    @Test
    void maskedPasswordsAreDecodedAsArtemisDoes() throws Exception {
        String masked = masked(PASSWORD);
        TlsEngines enc = TlsEngines.acceptor(acceptorParams("keyStorePassword", "ENC(" + masked + ")",
                "trustStorePassword", "ENC(" + masked + ")"));
        assertEquals(PASSWORD, enc.contextConfig().getKeystorePassword());
        assertEquals(PASSWORD, enc.contextConfig().getTruststorePassword());
        // <mask-password>true</mask-password>: bare masked values
        TlsEngines flag = TlsEngines.connector(connectorParams("keyStorePassword", masked, "trustStorePassword", masked,
                RdmaParameters.MASK_PASSWORD, "true"));
        assertEquals(PASSWORD, flag.contextConfig().getKeystorePassword());
        handshake(enc.newEngine(peer()), flag.newEngine(null));
        String why = refusal(IllegalArgumentException.class, () -> TlsEngines.acceptor(acceptorParams(
                "keyStorePassword", "ENC(" + masked + ")", RdmaParameters.PASSWORD_CODEC, "no.such.Codec")));
        assertTrue(why.startsWith("keyStorePassword: cannot be decoded"), why);
    }

    // ---- refusals that name the key --------------------------------------------------------------------------------

    @Test
    void unusableStoresAreRefusedNamingTheKey() {
        Object[][] cases = {
            {"keyStorePath", "/nowhere/broker.p12", "keyStorePath '/nowhere/broker.p12' cannot be read"},
            {"keyStorePassword", "wrong", "keyStorePassword does not open key store '"},
            {"keyStoreType", "NOSUCHTYPE", "keyStoreType 'NOSUCHTYPE' is not a store type"},
            {"keyStoreProvider", "NoSuchProvider", "keyStoreProvider 'NoSuchProvider' is not an installed"},
            {"keyStoreAlias", "nobody", "keyStoreAlias 'nobody' names no key in key store '"},
            {"trustStorePath", "/nowhere/trust.p12", "trustStorePath '/nowhere/trust.p12' cannot be read"},
            {"trustStorePassword", "wrong", "trustStorePassword does not open trust store '"},
        };
        assertAcceptorRefuses(cases);
        assertNotNull(TlsEngines.acceptor(acceptorParams("keyStoreAlias", "broker")));
        // a class path resource, as Artemis's SSLSupport finds it
        assertNotNull(TlsEngines.acceptor(acceptorParams("keyStorePath", "tls/broker.p12")));
    }

    @Test
    void malformedValuesAreRefusedNamingTheKey() {
        Object[][] cases = {
            {"sslEnabled", "yes", "sslEnabled: expected true or false, got 'yes'"},
            {"needClientAuth", "1", "needClientAuth: expected true or false, got '1'"},
            {"wantClientAuth", "on", "wantClientAuth: expected true or false, got 'on'"},
            {"verifyHost", "", "verifyHost: expected true or false, got ''"},
            {"sslAutoReload", "sometimes", "sslAutoReload: expected true or false"},
            {"sslHandshakeTimeout", "-1", "sslHandshakeTimeout: must be 0..31536000, got -1"},
            {"sslHandshakeTimeout", "10s", "sslHandshakeTimeout: not an integer: '10s'"},
            {"sslProvider", "OPENSSL", "sslProvider=OPENSSL is not supported over RDMA: only the JDK's SSLEngine"},
            {"sslProvider", "BORINGSSL", "sslProvider: expected JDK, got 'BORINGSSL'"},
            {"enabledProtocols", "TLSv9", "enabledProtocols 'TLSv9': "},
            {"enabledCipherSuites", "TLS_NO_SUCH_SUITE", "enabledCipherSuites 'TLS_NO_SUCH_SUITE': "},
        };
        assertAcceptorRefuses(cases);
        assertEquals(Duration.ZERO, TlsEngines.acceptor(acceptorParams("sslHandshakeTimeout", "0"))
                .handshakeTimeout(), "0: no timeout, as Netty's SslHandler");
        assertEquals(Duration.ofSeconds(3), TlsEngines.acceptor(acceptorParams("sslHandshakeTimeout", 3))
                .handshakeTimeout());
        String why = refusal(IllegalArgumentException.class,
                () -> TlsEngines.connector(connectorParams("trustAll", "maybe")));
        assertTrue(why.startsWith("trustAll: expected true or false"), why);
        why = refusal(IllegalArgumentException.class,
                () -> TlsEngines.connector(connectorParams("forceSSLParameters", "y")));
        assertTrue(why.startsWith("forceSSLParameters: expected true or false"), why);
        // refused with TLS off as well: a typo is not silently taken for false
        why = refusal(IllegalArgumentException.class,
                () -> TlsEngines.acceptor(Map.of("sslEnabled", "false", "needClientAuth", "ture")));
        assertTrue(why.startsWith("needClientAuth: expected true or false"), why);
    }

    /**
     * Each {key, value, message start}: an acceptor with that value is refused (IllegalArgumentException or
     * IllegalStateException) with a message that starts so.
     */
    private static void assertAcceptorRefuses(Object[][] cases) {
        for (Object[] c : cases) {
            RuntimeException e = assertThrows(RuntimeException.class,
                    () -> TlsEngines.acceptor(acceptorParams(c[0], c[1])), c[0] + "=" + c[1]);
            assertTrue(e instanceof IllegalArgumentException || e instanceof IllegalStateException, e.toString());
            assertTrue(e.getMessage().startsWith((String) c[2]), c[0] + "=" + c[1] + ": " + e.getMessage());
        }
    }

    @Test
    void anAcceptorWithTlsNeedsAKeyStore() {
        String why = refusal(IllegalArgumentException.class,
                () -> TlsEngines.acceptor(acceptorParams("keyStorePath", null)));
        assertTrue(why.startsWith("sslEnabled=true needs keyStorePath"), why);
        // a connector needs none: no client certificate
        assertNotNull(TlsEngines.connector(connectorParams("keyStorePath", null, "keyStorePassword", null)));
    }

    // ---- handshakes --------------------------------------------------------------------------------------------------

    @Test
    void mutuallyAuthenticatedHandshakeSucceeds() throws Exception {
        SSLEngine server = acceptorEngine("needClientAuth", "true");
        SSLEngine client = connectorEngine();
        handshake(client, server);
        assertTrue(server.getSession().getPeerPrincipal().getName().startsWith("CN=client"),
                server.getSession().getPeerPrincipal().getName());
        assertTrue(client.getSession().getPeerPrincipal().getName().startsWith("CN=broker"),
                client.getSession().getPeerPrincipal().getName());
        // verifyHost on the acceptor too: the client's certificate names 127.0.0.1, the peer's address
        handshake(connectorEngine(), acceptorEngine("needClientAuth", "true", "verifyHost", "true"));
        // over IPv6 to ::1, the connector checking the broker's certificate names it
        handshake(TlsEngines.connector(connectorParams("host", "::1")).newEngine(null), acceptorEngine());
    }

    @Test
    void aClientThatDoesNotTrustTheBrokerRefusesIt() {
        SSLException e = assertThrows(SSLException.class, () -> handshake(
                connectorEngine("trustStorePath", store("other-trust.p12")), acceptorEngine()));
        assertTrue(e.getMessage().contains("PKIX") || e.getMessage().contains("certificate"), e.toString());
    }

    @Test
    void needClientAuthRefusesAClientWithoutACertificateOrWithAnUntrustedOne() {
        assertThrows(SSLException.class, () -> handshake(
                connectorEngine("keyStorePath", null, "keyStorePassword", null),
                acceptorEngine("needClientAuth", "true")));
        assertThrows(SSLException.class, () -> handshake(
                connectorEngine("keyStorePath", store("other.p12")), acceptorEngine("needClientAuth", "true")));
        // without needClientAuth a client without a certificate is served
        assertServed(connectorEngine("keyStorePath", null, "keyStorePassword", null), acceptorEngine());
    }

    @Test
    void verifyHostRefusesABrokerCertificateForAnotherName() throws Exception {
        SSLException e = assertThrows(SSLException.class, () -> handshake(connectorEngine(),
                acceptorEngine("keyStorePath", store("broker-wrongname.p12"))));
        assertTrue(e.getMessage().contains("localhost") || e.getMessage().contains("subject alternative"),
                e.toString());
        // without verifyHost the same broker is served (its CA is trusted)
        handshake(connectorEngine("verifyHost", "false"), acceptorEngine("keyStorePath",
                store("broker-wrongname.p12")));
    }

    @Test
    void aWrongSniHostFails() throws Exception {
        assertThrows(SSLException.class, () -> handshake(connectorEngine("sniHost", "other.example"),
                acceptorEngine("sniHost", "broker\\.example")));
        handshake(connectorEngine("sniHost", "broker.example"), acceptorEngine("sniHost", "broker\\.example"));
    }

    @Test
    void trustAllTakesAnyBrokerCertificate() throws Exception {
        handshake(connectorEngine("trustStorePath", store("other-trust.p12"), "trustAll", "true",
                "verifyHost", "false"), acceptorEngine("keyStorePath", store("broker-wrongname.p12")));
    }

    @Test
    void disjointProtocolsFail() {
        assertThrows(SSLException.class, () -> handshake(connectorEngine("enabledProtocols", "TLSv1.2"),
                acceptorEngine("enabledProtocols", "TLSv1.3")));
    }

    // ---- the connector's system properties --------------------------------------------------------------------------

    @Test
    void connectorTakesTheSslSystemPropertiesUnlessForceSslParameters() throws Exception {
        Map<String, String> properties = Map.of("javax.net.ssl.trustStore", store("other-trust.p12"),
                "javax.net.ssl.trustStorePassword", "ENC(" + masked(PASSWORD) + ")",
                "javax.net.ssl.trustStoreType", "PKCS12");
        properties.forEach(System::setProperty);
        try {
            TlsEngines fromProperties = TlsEngines.connector(connectorParams());
            assertEquals(store("other-trust.p12"), fromProperties.contextConfig().getTruststorePath());
            assertEquals(PASSWORD, fromProperties.contextConfig().getTruststorePassword(), "ENC(...) decoded");
            assertThrows(SSLException.class, () -> handshake(fromProperties.newEngine(null), acceptorEngine()));

            TlsEngines forced = TlsEngines.connector(connectorParams("forceSSLParameters", "true"));
            assertEquals(store("trust.p12"), forced.contextConfig().getTruststorePath());
            handshake(forced.newEngine(null), acceptorEngine());

            System.setProperty("org.apache.activemq.ssl.trustStore", store("trust.p12"));
            assertEquals(store("trust.p12"), TlsEngines.connector(connectorParams()).contextConfig()
                    .getTruststorePath(), "org.apache.activemq.ssl.* before javax.net.ssl.*");
        } finally {
            properties.keySet().forEach(System::clearProperty);
            System.clearProperty("org.apache.activemq.ssl.trustStore");
        }
        // the acceptor never reads them
        assertEquals(store("trust.p12"), TlsEngines.acceptor(acceptorParams()).contextConfig().getTruststorePath());
    }

    // ---- helpers -----------------------------------------------------------------------------------------------------

    private static void assertServed(SSLEngine client, SSLEngine server) {
        try {
            handshake(client, server);
        } catch (SSLException e) {
            throw new AssertionError("handshake failed: " + e, e);
        }
    }

    /**
     * Runs the TLS handshake of {@code client} and {@code server} over heap buffers until both are done, then sends
     * one record each way; the first side's failure is thrown.
     */
    static void handshake(SSLEngine client, SSLEngine server) throws SSLException {
        ByteBuffer toServer = ByteBuffer.allocate(1 << 17);
        ByteBuffer toClient = ByteBuffer.allocate(1 << 17);
        client.beginHandshake();
        server.beginHandshake();
        for (int i = 0; i < 200; i++) {
            boolean moved = step(client, toClient, toServer) | step(server, toServer, toClient);
            if (done(client) && done(server) && toServer.position() == 0 && toClient.position() == 0) {
                exchange(client, server, toServer);
                exchange(server, client, toClient);
                return;
            }
            if (!moved) {
                throw new AssertionError("handshake stalled: client " + client.getHandshakeStatus() + ", server "
                        + server.getHandshakeStatus());
            }
        }
        throw new AssertionError("handshake did not finish");
    }

    private static boolean done(SSLEngine engine) {
        HandshakeStatus status = engine.getHandshakeStatus();
        return status == HandshakeStatus.NOT_HANDSHAKING
                || status == HandshakeStatus.FINISHED;
    }

    /** One step of {@code engine}: reads what its peer wrote into {@code in}, writes into {@code out}. */
    private static boolean step(SSLEngine engine, ByteBuffer in, ByteBuffer out)
            throws SSLException {
        boolean moved = false;
        ByteBuffer app = ByteBuffer.allocate(1 << 17);
        while (true) {
            switch (engine.getHandshakeStatus()) {
                case NEED_TASK -> {
                    Runnable task;
                    while ((task = engine.getDelegatedTask()) != null) {
                        task.run();
                    }
                    moved = true;
                }
                case NEED_WRAP -> {
                    SSLEngineResult result = engine.wrap(ByteBuffer.allocate(0), out);
                    if (result.bytesProduced() == 0 && result.getHandshakeStatus()
                            == HandshakeStatus.NEED_WRAP) {
                        return moved;
                    }
                    moved = true;
                }
                case NEED_UNWRAP, NEED_UNWRAP_AGAIN -> {
                    if (!unwrap(engine, in, app)) {
                        return moved;
                    }
                    moved = true;
                }
                default -> { // done: post-handshake messages (TLS 1.3 session tickets) are still read
                    if (in.position() > 0 && unwrap(engine, in, app)) {
                        moved = true;
                        continue;
                    }
                    return moved;
                }
            }
        }
    }

    /** Unwraps one record of {@code in} (written, not yet flipped); false when none is whole. */
    private static boolean unwrap(SSLEngine engine, ByteBuffer in, ByteBuffer app)
            throws SSLException {
        in.flip();
        try {
            SSLEngineResult result = engine.unwrap(in, app);
            return result.getStatus() != SSLEngineResult.Status.BUFFER_UNDERFLOW
                    && (result.bytesConsumed() > 0 || result.bytesProduced() > 0
                    || result.getHandshakeStatus() != HandshakeStatus.NEED_UNWRAP);
        } finally {
            in.compact();
        }
    }

    /** One application record from {@code from} to {@code to}, read back intact. */
    private static void exchange(SSLEngine from, SSLEngine to, ByteBuffer wire) throws SSLException {
        byte[] payload = ("hello from " + (from.getUseClientMode() ? "client" : "server")).getBytes();
        from.wrap(ByteBuffer.wrap(payload), wire);
        wire.flip();
        ByteBuffer app = ByteBuffer.allocate(1 << 17);
        while (wire.hasRemaining()) {
            to.unwrap(wire, app);
        }
        wire.clear();
        app.flip();
        byte[] received = new byte[app.remaining()];
        app.get(received);
        assertEquals(new String(payload), new String(received));
    }
}
