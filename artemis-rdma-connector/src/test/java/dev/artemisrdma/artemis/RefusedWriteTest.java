package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.api.SendMemoryException;
import dev.artemisrdma.transport.config.TransportConfig;
import org.apache.activemq.artemis.api.core.ActiveMQBuffer;
import org.apache.activemq.artemis.api.core.ActiveMQException;
import org.apache.activemq.artemis.core.server.ActiveMQComponent;
import org.apache.activemq.artemis.spi.core.remoting.BaseConnectionLifeCycleListener;
import org.apache.activemq.artemis.spi.core.remoting.BufferHandler;
import org.apache.activemq.artemis.spi.core.remoting.Connection;
import org.junit.jupiter.api.Test;

/**
 * Issue 10, item 5 and the registered-memory cap, seen from Artemis: a Core packet the open channel refuses (larger
 * than the peer's handshake accepts, or no registered memory for it under maxRegisteredMemory) never throws into the
 * broker thread that wrote it; that one connection fails, with a reason that names the sizes and the key to raise.
 */
class RefusedWriteTest {

    private static final BufferHandler IGNORE = (id, buffer) -> { };

    /** What Artemis hears about one connection. */
    private static final class Events implements BaseConnectionLifeCycleListener<Object> {
        final CompletableFuture<Boolean> destroyed = new CompletableFuture<>();
        final List<ActiveMQException> exceptions = new CopyOnWriteArrayList<>();

        @Override
        public void connectionCreated(ActiveMQComponent component, Connection connection, Object protocol) {
        }

        @Override
        public void connectionDestroyed(Object connectionID, boolean failed) {
            destroyed.complete(failed);
        }

        @Override
        public void connectionException(Object connectionID, ActiveMQException me) {
            exceptions.add(me);
        }

        @Override
        public void connectionReadyForWrites(Object connectionID, boolean ready) {
        }
    }

    /** A server connection (with {@code serverSettings}) and a client (with {@code clientSettings}) to it. */
    private static final class Pair implements AutoCloseable {
        final Events serverEvents = new Events();
        final Events clientEvents = new Events();
        final RdmaConnection server;
        final RdmaConnection client;
        private final RdmaRuntime.Lease serverLease;
        private final RdmaRuntime.Lease clientLease;
        private final AutoCloseable listening;

        Pair(int port, Map<String, Object> serverSettings, Map<String, Object> clientSettings) throws Exception {
            TestRuntime.install();
            InetSocketAddress address = new InetSocketAddress("127.0.0.1", port);
            Map<String, Object> params = Map.of("host", "127.0.0.1", "port", port);
            serverLease = RdmaRuntime.acquire(TransportConfig.fromMap(serverSettings));
            clientLease = RdmaRuntime.acquire(TransportConfig.fromMap(clientSettings));
            CompletableFuture<RdmaConnection> accepted = new CompletableFuture<>();
            listening = serverLease.transport().listen(address, ch -> {
                RdmaConnection c = new RdmaConnection(params, IGNORE, serverEvents, Runnable::run, 0, true).bind(ch);
                accepted.complete(c);
                return c;
            });
            client = new RdmaConnection(params, IGNORE, clientEvents, Runnable::run, 0, false);
            client.bind(clientLease.transport().connect(address, client));
            server = accepted.get(5, TimeUnit.SECONDS);
        }

        @Override
        public void close() throws Exception {
            client.close();
            server.close();
            listening.close();
            clientLease.close();
            serverLease.close();
        }
    }

    /** A Core-shaped packet (length field first) of {@code size} bytes, encoded as Artemis does. */
    private static void write(RdmaConnection connection, int size) {
        ActiveMQBuffer buffer = connection.createTransportBuffer(size);
        buffer.writeInt(size - 4);
        buffer.writeBytes(new byte[size - 4]);
        connection.write(buffer, true, false);
    }

    @Test
    void aPacketLargerThanThePeerAcceptsFailsThatConnectionWithTheSizesAndTheKey() throws Exception {
        // the client accepts frames of 4 KiB, the floor of the handshake; the broker side writes 10 KiB
        try (Pair p = new Pair(61761, Map.of(), Map.of("maxFrameSize", "4k"))) {
            assertDoesNotThrow(() -> write(p.server, 10_240), "a refused packet must not throw into the writer");
            assertTrue(p.serverEvents.destroyed.get(5, TimeUnit.SECONDS), "reported as failed, so clients fail over");
            assertEquals(1, p.serverEvents.exceptions.size());
            String why = p.serverEvents.exceptions.get(0).getMessage();
            assertTrue(why.contains("frame of 10240 bytes") && why.contains("maximum frame size 4096")
                    && why.contains("raise maxFrameSize on the peer's side") && why.contains("peer 10.77.0.2"), why);
            assertFalse(p.server.isOpen());
            // the peer hears the disconnect: its side of the connection fails too
            assertTrue(p.clientEvents.destroyed.get(5, TimeUnit.SECONDS));
            // what is written after the failure is dropped quietly (the connection is already reported)
            assertDoesNotThrow(() -> write(p.server, 100));
        }
    }

    @Test
    void aSendBufferRefusedByMaxRegisteredMemoryFailsThatConnectionNamingTheKey() throws Exception {
        // the connection's own memory (9 slots of 16 KiB and the send headers) fits under 1 MiB; the first 1 MiB slab
        // of send buffers does not. (FakeFabric gives the client the address 10.77.0.2.)
        Map<String, Object> tight = Map.of("maxRegisteredMemory", "1m", "receiveSlots", 8, "slotSize", "16k",
                "sharedReceiveQueue", "false"); // a shared pool (8 MiB by default) would not fit 1 MiB at all
        try (Pair p = new Pair(61762, tight, Map.of())) {
            SendMemoryException refused = assertThrows(SendMemoryException.class,
                    () -> p.server.channel().allocate(1000));
            assertTrue(refused.getMessage().contains("raise maxRegisteredMemory")
                    && refused.getMessage().contains("1000-byte send buffer"), refused.getMessage());
            assertTrue(p.server.isOpen(), "a refused allocation alone harms nothing");

            assertDoesNotThrow(() -> write(p.server, 1000));
            assertTrue(p.serverEvents.destroyed.get(5, TimeUnit.SECONDS), "the connection fails instead of "
                    + "carrying on with a packet missing");
            String why = p.serverEvents.exceptions.get(0).getMessage();
            assertTrue(why.contains("raise maxRegisteredMemory") && why.contains("peer 10.77.0.2"), why);
            assertTrue(p.clientEvents.destroyed.get(5, TimeUnit.SECONDS));
        }
    }
}
