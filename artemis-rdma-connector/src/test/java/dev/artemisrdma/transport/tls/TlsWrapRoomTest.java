package dev.artemisrdma.transport.tls;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.nio.ByteBuffer;
import java.security.KeyStore;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.TrustManagerFactory;

import org.junit.jupiter.api.Test;

/**
 * {@link TlsChannel#cipherBound}: a frame of any size wraps into that room with the JDK's engine without a
 * {@code BUFFER_OVERFLOW} (which made every small frame's records go through a fresh heap buffer of 33 KiB), and the
 * peer reads back the same bytes. Two engines of the test stores, handshaken in memory.
 */
class TlsWrapRoomTest {

    private static final char[] PASSWORD = "secureexample".toCharArray();

    @Test
    void framesOfEverySizeWrapWithoutOverflowIntoTheBound() throws Exception {
        SSLEngine client = context("client").createSSLEngine("localhost", 61701);
        client.setUseClientMode(true);
        SSLEngine server = context("broker").createSSLEngine();
        server.setUseClientMode(false);
        handshake(client, server);
        int packetSize = client.getSession().getPacketBufferSize();
        int[] sizes = {1, 100, 1024, 4096, 15_000, 16_383, 16_384, 16_385, 32_768, 32_769, 65_536 + 100, 300_000};
        for (int size : sizes) {
            byte[] frame = new byte[size];
            for (int i = 0; i < size; i++) {
                frame[i] = (byte) (i * 31 + size);
            }
            ByteBuffer plain = ByteBuffer.wrap(frame);
            ByteBuffer records = ByteBuffer.allocate(TlsChannel.cipherBound(size, packetSize));
            int wraps = 0;
            while (plain.hasRemaining()) {
                SSLEngineResult r = client.wrap(plain, records);
                assertEquals(SSLEngineResult.Status.OK, r.getStatus(), size + " bytes, record " + wraps + ": "
                        + records.remaining() + " bytes of room left of " + records.capacity());
                wraps++;
            }
            assertTrue(wraps >= (size + 16_383) / 16_384, wraps + " records of " + size + " bytes");
            records.flip();
            ByteBuffer read = ByteBuffer.allocate(size + packetSize);
            while (records.hasRemaining()) {
                assertEquals(SSLEngineResult.Status.OK, server.unwrap(records, read).getStatus());
            }
            read.flip();
            byte[] back = new byte[read.remaining()];
            read.get(back);
            assertArrayEquals(frame, back, size + " bytes read back");
        }
        assertTrue(TlsChannel.cipherBound(1, packetSize) >= packetSize, "a small frame gets a whole packet's room");
    }

    private static void handshake(SSLEngine client, SSLEngine server) throws Exception {
        ByteBuffer toServer = ByteBuffer.allocate(1 << 17);
        ByteBuffer toClient = ByteBuffer.allocate(1 << 17);
        ByteBuffer sink = ByteBuffer.allocate(1 << 17);
        client.beginHandshake();
        server.beginHandshake();
        for (int step = 0; step < 100 && !(done(client) && done(server)); step++) {
            step(client, toServer, toClient, sink);
            step(server, toClient, toServer, sink);
        }
        assertTrue(done(client) && done(server), "handshake: " + client.getHandshakeStatus() + " / "
                + server.getHandshakeStatus());
    }

    /** One round of {@code engine}: wraps into {@code out}, unwraps what {@code in} has. */
    private static void step(SSLEngine engine, ByteBuffer out, ByteBuffer in, ByteBuffer sink) throws Exception {
        while (true) {
            switch (engine.getHandshakeStatus()) {
                case NEED_TASK -> {
                    Runnable task;
                    while ((task = engine.getDelegatedTask()) != null) {
                        task.run();
                    }
                }
                case NEED_WRAP -> engine.wrap(ByteBuffer.allocate(0), out);
                case NEED_UNWRAP -> {
                    in.flip();
                    SSLEngineResult r = in.hasRemaining() ? engine.unwrap(in, sink) : null;
                    in.compact();
                    if (r == null || r.getStatus() == SSLEngineResult.Status.BUFFER_UNDERFLOW) {
                        return;
                    }
                }
                default -> {
                    return;
                }
            }
        }
    }

    private static boolean done(SSLEngine engine) {
        return engine.getHandshakeStatus() == SSLEngineResult.HandshakeStatus.NOT_HANDSHAKING;
    }

    private static SSLContext context(String key) throws Exception {
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(store(key), PASSWORD);
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(store("trust"));
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(kmf.getKeyManagers(), tmf.getTrustManagers(), null);
        return context;
    }

    private static KeyStore store(String name) throws Exception {
        KeyStore ks = KeyStore.getInstance("PKCS12");
        try (InputStream in = TlsWrapRoomTest.class.getResourceAsStream("/tls/" + name + ".p12")) {
            if (in == null) {
                throw new IllegalStateException("test store /tls/" + name + ".p12 is missing (see make-stores)");
            }
            ks.load(in, PASSWORD);
        }
        return ks;
    }
}
