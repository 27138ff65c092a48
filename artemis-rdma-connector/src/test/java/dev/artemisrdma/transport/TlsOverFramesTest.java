package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.security.KeyStore;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.TrustManagerFactory;

import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.api.SendBuffer;
import dev.artemisrdma.transport.api.TlsEngineFactory;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.tls.TlsChannel;

/**
 * TLS in frames over the in-memory fabric, with the JDK's engine and the test stores of {@code src/test/resources/tls}
 * (made by its {@code make-stores}): frames of every size both ways, the handshake before the application, refusals
 * that name the cause, and a peer that never finishes its handshake.
 */
class TlsOverFramesTest {

    private static final char[] PASSWORD = "secureexample".toCharArray();

    static TransportConfig config() {
        return TransportConfig.builder().rnrRetryCount(0).busyPollMicros(0).slotSize(4096)
                .closeTimeout(Duration.ofMillis(500)).build();
    }

    @Test
    void framesOfEverySizeFlowBothWaysAfterTheHandshake() throws Exception {
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, config());
             RdmaTransport client = RdmaTransport.create(fabric, config())) {
            Peers.Recorder serverSide = new Peers.Recorder();
            CompletableFuture<RdmaChannel> accepted = new CompletableFuture<>();
            RdmaServer listening = server.listen(Peers.serverAddress(),
                    Peers.admitting(ch -> { }, accepted::complete, serverSide), engines("broker", "trust", true));
            Peers.Recorder clientSide = new Peers.Recorder();
            RdmaChannel channel = client.connect(listening.localAddress(), clientSide, engines("client", "trust", false));
            RdmaChannel served = accepted.get(5, TimeUnit.SECONDS);
            assertTrue(served instanceof TlsChannel, "the acceptor is offered the TLS channel: " + served);
            assertTrue(((TlsChannel) channel).describeSession().startsWith("TLSv1.3"),
                    ((TlsChannel) channel).describeSession());
            // one byte, a slot, several records (16 KiB each), and a frame that is fragmented over many slots
            int[] sizes = {1, 100, 4088, 4096, 16384, 16385, 50_000, 300_000};
            for (int i = 0; i < sizes.length; i++) {
                channel.write(ByteBuffer.wrap(Peers.payload(7, i, sizes[i])), i % 2 == 0);
                SendBuffer b = served.allocate(sizes[i]);
                b.buffer().put(Peers.payload(8, i, sizes[i]));
                served.write(b, true);
            }
            channel.flush();
            Peers.await("frames both ways", 10_000,
                    () -> serverSide.count() == sizes.length && clientSide.count() == sizes.length);
            for (int i = 0; i < sizes.length; i++) {
                assertEquals(sizes[i], serverSide.sizes.get(i));
                assertEquals(Peers.crc(Peers.payload(7, i, sizes[i])), serverSide.crcs.get(i));
                assertEquals(Peers.crc(Peers.payload(8, i, sizes[i])), clientSide.crcs.get(i));
            }
            assertTrue(serverSide.threadViolations.isEmpty(), serverSide.threadViolations.toString());
            // the wire carried records, not the frames: more bytes than the plaintext (a record's header and tag)
            long plaintext = java.util.Arrays.stream(sizes).asLongStream().sum();
            assertTrue(channel.stats().bytesSent() > plaintext, channel.stats().bytesSent() + " bytes sent for "
                    + plaintext + " of plaintext");
            channel.close();
            assertNull(clientSide.closed.get(5, TimeUnit.SECONDS), "a local close has no cause");
            FabricException peerCause = serverSide.closed.get(5, TimeUnit.SECONDS);
            assertTrue(peerCause != null && peerCause.getMessage().contains("closed the connection"),
                    String.valueOf(peerCause));
        }
        assertReleased(fabric);
    }

    @Test
    void aPlainPeerAndATlsListenerRefuseEachOtherNamingSslEnabled() throws Exception {
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, config());
             RdmaTransport client = RdmaTransport.create(fabric, config())) {
            AtomicInteger offered = new AtomicInteger();
            ChannelAcceptor counting = Peers.admitting(ch -> { }, ch -> offered.incrementAndGet(), new Peers.Recorder());
            RdmaServer tls = server.listen(Peers.serverAddress(), counting, engines("broker", "trust", false));
            FabricException plainToTls = assertThrows(FabricException.class,
                    () -> client.connect(tls.localAddress(), new Peers.Recorder()));
            assertTrue(plainToTls.getMessage().contains("sslEnabled=true"), plainToTls.getMessage());
            RdmaServer plain = server.listen(Peers.serverAddress(), counting);
            FabricException tlsToPlain = assertThrows(FabricException.class,
                    () -> client.connect(plain.localAddress(), new Peers.Recorder(), engines("client", "trust", false)));
            assertTrue(tlsToPlain.getMessage().contains("sslEnabled"), tlsToPlain.getMessage());
            assertEquals(0, offered.get(), "neither listener offered the application a connection");
            // each goes on serving its own kind
            client.connect(tls.localAddress(), new Peers.Recorder(), engines("client", "trust", false)).close();
            client.connect(plain.localAddress(), new Peers.Recorder()).close();
            Peers.await("both served", 5000, () -> offered.get() == 2);
        }
        assertReleased(fabric);
    }

    @Test
    void failedHandshakesNeverReachTheApplicationAndSayWhy() throws Exception {
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, config());
             RdmaTransport client = RdmaTransport.create(fabric, config())) {
            AtomicInteger offered = new AtomicInteger();
            RdmaServer needsClientCert = server.listen(Peers.serverAddress(),
                    Peers.admitting(ch -> { }, ch -> offered.incrementAndGet(), new Peers.Recorder()),
                    engines("broker", "trust", true));
            FabricException noCert = assertThrows(FabricException.class, () -> client.connect(
                    needsClientCert.localAddress(), new Peers.Recorder(), engines(null, "trust", false)));
            assertTrue(noCert.getMessage().contains("TLS handshake"), noCert.getMessage());
            FabricException untrusted = assertThrows(FabricException.class, () -> client.connect(
                    needsClientCert.localAddress(), new Peers.Recorder(), engines("client", "other-trust", false)));
            assertTrue(untrusted.getMessage().contains("TLS handshake") && untrusted.getMessage().toLowerCase()
                    .contains("cert"), untrusted.getMessage());
            FabricException otherClient = assertThrows(FabricException.class, () -> client.connect(
                    needsClientCert.localAddress(), new Peers.Recorder(), engines("other", "trust", false)));
            assertTrue(otherClient.getMessage().contains("TLS handshake"), otherClient.getMessage());
            assertEquals(0, offered.get(), "no failed handshake reached the application");
            client.connect(needsClientCert.localAddress(), new Peers.Recorder(), engines("client", "trust", false))
                    .close();
            Peers.await("the trusted client served", 5000, () -> offered.get() == 1);
            Peers.await("failed connections released", 5000, () -> server.channelCount() <= 1);
        }
        assertReleased(fabric);
    }

    @Test
    void aPeerThatNeverFinishesItsHandshakeIsDisconnectedAtTheTimeout() throws Exception {
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, config());
             RdmaTransport client = RdmaTransport.create(fabric, config())) {
            AtomicInteger offered = new AtomicInteger();
            TlsEngineFactory quick = withTimeout(engines("broker", "trust", false), Duration.ofMillis(300));
            RdmaServer listening = server.listen(Peers.serverAddress(),
                    Peers.admitting(ch -> { }, ch -> offered.incrementAndGet(), new Peers.Recorder()), quick);
            // the listener never reads the client's hello: its deadline must end the connection, and the client
            // (which would wait 30 s) hears of it at once
            fabric.freeze(listening.localAddress());
            long start = System.nanoTime();
            try {
                FabricException e = assertThrows(FabricException.class, () -> client.connect(
                        listening.localAddress(), new Peers.Recorder(),
                        withTimeout(engines("client", "trust", false), Duration.ofSeconds(30))));
                long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                assertTrue(millis < 10_000, "the client waited " + millis + " ms: " + e.getMessage());
            } finally {
                fabric.thaw(listening.localAddress());
            }
            assertEquals(0, offered.get());
            Peers.await("the stalled connection released", 5000, () -> server.channelCount() == 0);
        }
        assertReleased(fabric);
    }

    private static void assertReleased(FakeFabric fabric) throws InterruptedException {
        try {
            Peers.await("queue pairs released", 5000, () -> fabric.liveQueuePairs() == 0);
            assertEquals(0, fabric.liveMemoryRegions(), "live memory regions");
            fabric.assertNoViolations();
        } finally {
            fabric.close();
        }
    }

    /** Engines from the test stores: {@code key} null for none; server mode needs {@code needClientAuth}. */
    static TlsEngineFactory engines(String key, String trust, boolean needClientAuth) throws Exception {
        SSLContext context = SSLContext.getInstance("TLS");
        KeyManagerFactory kmf = null;
        if (key != null) {
            kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
            kmf.init(store(key), PASSWORD);
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(store(trust));
        context.init(kmf == null ? null : kmf.getKeyManagers(), tmf.getTrustManagers(), null);
        boolean server = "broker".equals(key);
        return new TlsEngineFactory() {
            @Override
            public SSLEngine newEngine(InetSocketAddress peer) {
                SSLEngine engine = context.createSSLEngine(peer.getHostString(), peer.getPort());
                engine.setUseClientMode(!server);
                engine.setNeedClientAuth(server && needClientAuth);
                return engine;
            }

            @Override
            public Duration handshakeTimeout() {
                return Duration.ofSeconds(10);
            }
        };
    }

    static TlsEngineFactory withTimeout(TlsEngineFactory f, Duration timeout) {
        return new TlsEngineFactory() {
            @Override
            public SSLEngine newEngine(InetSocketAddress peer) {
                return f.newEngine(peer);
            }

            @Override
            public Duration handshakeTimeout() {
                return timeout;
            }
        };
    }

    private static KeyStore store(String name) throws Exception {
        KeyStore ks = KeyStore.getInstance("PKCS12");
        try (InputStream in = TlsOverFramesTest.class.getResourceAsStream("/tls/" + name + ".p12")) {
            if (in == null) {
                throw new IllegalStateException("test store /tls/" + name + ".p12 is missing (see make-stores)");
            }
            ks.load(in, PASSWORD);
        }
        return ks;
    }
}
