package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.BoundedClose;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import org.apache.activemq.artemis.api.core.ActiveMQException;
import org.apache.activemq.artemis.core.server.ActiveMQComponent;
import org.apache.activemq.artemis.spi.core.protocol.ProtocolManager;
import org.apache.activemq.artemis.spi.core.remoting.Connection;
import org.apache.activemq.artemis.spi.core.remoting.ServerConnectionLifeCycleListener;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The acceptor's own bounds: connectionsAllowed, a failing broker callback, the bound port, a bounded stop. */
class AcceptorLimitsTest {

    private static final String HOST = "127.0.0.1";

    @BeforeAll
    static void runtime() {
        TestRuntime.install();
    }

    /** What the broker is told. */
    private static final class Broker implements ServerConnectionLifeCycleListener {
        final List<Object> created = new CopyOnWriteArrayList<>();
        final List<Boolean> destroyedFailed = new CopyOnWriteArrayList<>();
        volatile RuntimeException refuse;

        @Override
        public void connectionCreated(ActiveMQComponent component, Connection connection, ProtocolManager protocol) {
            if (refuse != null) {
                throw refuse;
            }
            created.add(connection.getID());
        }

        @Override
        public void connectionDestroyed(Object connectionID, boolean failed) {
            destroyedFailed.add(failed);
        }

        @Override
        public void connectionException(Object connectionID, ActiveMQException me) {
        }

        @Override
        public void connectionReadyForWrites(Object connectionID, boolean ready) {
        }
    }

    /** A client that ignores what it gets. */
    private static class Client implements ChannelHandler {
        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
        }
    }

    private static RdmaAcceptor acceptor(Broker broker, int port, Map<String, Object> extra) {
        Map<String, Object> params = new HashMap<>(Map.of(RdmaParameters.HOST, HOST, RdmaParameters.PORT, port));
        params.putAll(extra);
        return new RdmaAcceptor("limits", null, params,
                RdmaParameters.parse("limits", params, RdmaParameters.ACCEPTOR_KEYS), (id, buffer) -> { }, broker,
                Runnable::run, null, Map.of(), null, null);
    }

    private static void await(String what, java.util.function.BooleanSupplier condition) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting for " + what);
            Thread.sleep(2);
        }
    }

    @Test
    void connectionsBeyondConnectionsAllowedAreRefusedWithTheKey() throws Exception {
        Broker broker = new Broker();
        RdmaAcceptor acceptor = acceptor(broker, 61751, Map.of(RdmaParameters.CONNECTIONS_ALLOWED, "2"));
        acceptor.start();
        try (RdmaRuntime.Lease lease = RdmaRuntime.acquire(TransportConfig.defaults())) {
            InetSocketAddress address = new InetSocketAddress(HOST, 61751);
            // the broker counts a connection once it is established on its side, which may follow connect's return
            RdmaChannel first = lease.transport().connect(address, new Client());
            lease.transport().connect(address, new Client());
            await("two connections counted", () -> acceptor.connectionCount() == 2);
            FabricException refused = assertThrows(FabricException.class,
                    () -> lease.transport().connect(address, new Client()));
            assertTrue(refused.getMessage().contains("connectionsAllowed"), refused.getMessage());
            assertEquals(2, acceptor.connectionCount());
            first.close();
            await("the closed connection to leave", () -> acceptor.connectionCount() == 1);
            lease.transport().connect(address, new Client());
            await("the new one counted", () -> acceptor.connectionCount() == 2);
        } finally {
            acceptor.stop();
        }
    }

    /**
     * Artemis's Connection is made once the RDMA connection is established; a broker that refuses it then (shutting
     * down, say) closes the connection, which the client sees fail, and keeps no entry for it.
     */
    @Test
    void aBrokerThatRefusesTheConnectionClosesItAndLeavesNoEntryBehind() throws Exception {
        Broker broker = new Broker();
        broker.refuse = new IllegalStateException("the broker is shutting down");
        RdmaAcceptor acceptor = acceptor(broker, 61752, Map.of());
        acceptor.start();
        try (RdmaRuntime.Lease lease = RdmaRuntime.acquire(TransportConfig.defaults())) {
            InetSocketAddress address = new InetSocketAddress(HOST, 61752);
            java.util.concurrent.CompletableFuture<FabricException> closed = new java.util.concurrent
                    .CompletableFuture<>();
            try {
                lease.transport().connect(address, new Client() {
                    @Override
                    public void onClosed(RdmaChannel channel, FabricException cause) {
                        closed.complete(cause);
                    }
                });
                assertNotNull(closed.get(5, TimeUnit.SECONDS), "the client hears its connection fail");
            } catch (FabricException closedFirst) {
                // the close overtook connect's return: as good
            }
            await("the refused connection to leave", () -> acceptor.connectionCount() == 0);
        } finally {
            acceptor.stop();
        }
    }

    /** A peer that never finishes connecting costs the broker no Connection: none is made before establishment. */
    @Test
    void noArtemisConnectionIsMadeBeforeTheRdmaConnectionIsEstablished() throws Exception {
        Broker broker = new Broker();
        RdmaAcceptor acceptor = acceptor(broker, 61754, Map.of());
        acceptor.start();
        TransportConfig impatient = TransportConfig.defaults().toBuilder()
                .connectTimeout(java.time.Duration.ofSeconds(1)).build();
        try (RdmaRuntime.Lease lease = RdmaRuntime.acquire(impatient)) {
            InetSocketAddress address = new InetSocketAddress(HOST, 61754);
            // requests are accepted, the connections never established
            FakeFabricSupplier.current().stallHandshakes(true);
            Thread stalled = new Thread(() -> {
                try {
                    lease.transport().connect(address, new Client());
                } catch (FabricException expected) {
                    // the connect times out
                }
            });
            stalled.start();
            Thread.sleep(300);
            assertEquals(0, broker.created.size(), "a Connection made for a peer that has not connected");
            assertEquals(0, acceptor.connectionCount());
            FakeFabricSupplier.current().stallHandshakes(false);
            stalled.join(30_000);
            lease.transport().connect(address, new Client());
            await("a Connection once established", () -> broker.created.size() == 1);
            assertEquals(1, acceptor.connectionCount());
        } finally {
            acceptor.stop();
        }
    }

    @Test
    void portZeroReportsTheBoundPort() throws Exception {
        RdmaAcceptor acceptor = acceptor(new Broker(), 0, Map.of());
        acceptor.start();
        try (RdmaRuntime.Lease lease = RdmaRuntime.acquire(TransportConfig.defaults())) {
            int port = acceptor.getActualPort();
            assertNotEquals(0, port);
            lease.transport().connect(new InetSocketAddress(HOST, port), new Client()).close();
        } finally {
            acceptor.stop();
        }
    }

    @Test
    void stopIsBoundedWhatEverThePeersDo() throws Exception {
        Broker broker = new Broker();
        RdmaAcceptor acceptor = acceptor(broker, 61753, Map.of());
        acceptor.start();
        List<InetSocketAddress> hung = new ArrayList<>();
        try (RdmaRuntime.Lease lease = RdmaRuntime.acquire(TransportConfig.defaults())) {
            for (int i = 0; i < 3; i++) {
                RdmaChannel client = lease.transport().connect(new InetSocketAddress(HOST, 61753), new Client());
                hung.add(client.localAddress());
                FakeFabricSupplier.current().freeze(client.localAddress()); // its host hangs: no goodbye completes
            }
            await("three connections", () -> broker.created.size() == 3);
            long start = System.nanoTime();
            acceptor.stop();
            long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            // orderly closes would each wait connectTimeout (10 s) for the hung peers, one after the other
            long bound = BoundedClose.channelOrderlyBound(TransportConfig.defaults())
                    .plus(BoundedClose.channelForcedBound()).toMillis();
            assertTrue(millis < bound + 1000,
                    "stopping took " + millis + " ms");
            assertEquals(List.of(true, true, true), broker.destroyedFailed, "the broker was not told of each loss");
            assertEquals(0, acceptor.connectionCount());
        } finally {
            hung.forEach(FakeFabricSupplier.current()::thaw);
            acceptor.stop();
        }
    }
}
