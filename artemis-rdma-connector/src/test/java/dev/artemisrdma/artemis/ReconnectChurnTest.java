package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.artemis.ConnectOutages.Report;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import org.apache.activemq.artemis.api.core.ActiveMQException;
import org.apache.activemq.artemis.spi.core.remoting.ClientConnectionLifeCycleListener;
import org.apache.activemq.artemis.spi.core.remoting.Connection;
import org.apache.activemq.artemis.spi.core.remoting.Connector;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A client, bridge or cluster link retrying an unreachable peer (Artemis: a new connector per attempt, closed when the
 * attempt fails) keeps one transport across its failed attempts instead of building and tearing one down each time,
 * and says the outage once at WARN, then at debug, and once at INFO when the peer is back. On the in-memory fabric.
 */
class ReconnectChurnTest {

    private static ScheduledExecutorService scheduler;

    @BeforeAll
    static void runtime() {
        TestRuntime.install();
        scheduler = Executors.newSingleThreadScheduledExecutor();
    }

    @AfterAll
    static void stop() {
        scheduler.shutdownNow();
    }

    /** A transport of its own (its settings differ from every other test's), so the counts are this test's. */
    private static Map<String, Object> params(int port, int receiveSlots) {
        return Map.of("host", "127.0.0.1", "port", port, "receiveSlots", receiveSlots);
    }

    private static Connector connector(Map<String, Object> params) {
        return new RdmaConnectorFactory().createConnector(params, (connectionID, buffer) -> { }, new Quiet(),
                Runnable::run, Runnable::run, scheduler, null);
    }

    @Test
    void failedAttemptsShareOneTransportAndTheOutageIsSaidOnce() throws Exception {
        Map<String, Object> params = params(61781, 24);
        String target = new InetSocketAddress("127.0.0.1", 61781).toString();
        long openedBefore = RdmaRuntime.transportsOpened();
        int openBefore = RdmaRuntime.openTransports();
        for (int attempt = 0; attempt < 20; attempt++) { // as ClientSessionFactoryImpl retries: connector per attempt
            Connector connector = connector(params);
            connector.start();
            assertNull(connector.createConnection(), "nobody listens on the port yet");
            connector.close();
            assertTrue(ConnectOutages.jvm().inOutage(target));
        }
        assertEquals(openedBefore + 1, RdmaRuntime.transportsOpened(), "a transport was built per failed attempt");
        assertEquals(openBefore + 1, RdmaRuntime.openTransports(), "the transport did not stay for the next attempt");

        // the peer comes back: the next attempt connects on the same transport, and the outage ends
        try (RdmaRuntime.Lease server = RdmaRuntime.acquire(TransportConfig.fromMap(Map.of("receiveSlots", 25)))) {
            server.transport().listen(new InetSocketAddress("127.0.0.1", 61781), ch -> new Echo());
            long openedWithServer = RdmaRuntime.transportsOpened();
            Connector connector = connector(params);
            connector.start();
            Connection connection = connector.createConnection();
            assertNotNull(connection, "the peer is back");
            assertFalse(ConnectOutages.jvm().inOutage(target), "the outage did not end with the connection");
            assertEquals(openedWithServer, RdmaRuntime.transportsOpened(), "the retry built a new transport");
            connection.close();
            connector.close(); // an orderly close: the transport goes at once, nothing lingers
            assertEquals(openBefore + 1, RdmaRuntime.openTransports(), "the client transport outlived its close"
                    + " (only the server's may be open)");
        }
        assertEquals(openBefore, RdmaRuntime.openTransports());
    }

    @Test
    void aLingeringTransportClosesWhenNoAttemptComes() throws Exception {
        Map<String, Object> params = params(61782, 26);
        int openBefore = RdmaRuntime.openTransports();
        Connector connector = connector(params);
        connector.start();
        assertNull(connector.createConnection());
        connector.close();
        assertEquals(openBefore + 1, RdmaRuntime.openTransports());
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(RdmaRuntime.RETRY_LINGER_MS + 5_000);
        while (RdmaRuntime.openTransports() > openBefore && System.nanoTime() < deadline) {
            Thread.sleep(100);
        }
        assertEquals(openBefore, RdmaRuntime.openTransports(), "the lingering transport was never closed");
    }

    @Test
    void outagesAreSaidOnceAtWarnThenAtDebugThenOnceAtInfo() {
        ConnectOutages outages = new ConnectOutages();
        assertEquals(Report.NONE, outages.connected("peer:1"), "a first connection is no recovery");
        assertEquals(Report.WARN, outages.failed("peer:1", "rejected"));
        for (int i = 0; i < 50; i++) {
            assertEquals(Report.DEBUG, outages.failed("peer:1", "rejected"));
        }
        assertEquals(Report.WARN, outages.failed("peer:2", "no route"), "another target's outage is its own");
        assertEquals(Report.INFO, outages.connected("peer:1"));
        assertEquals(Report.NONE, outages.connected("peer:1"));
        assertEquals(Report.WARN, outages.failed("peer:1", "rejected"), "a new outage is said again");
        for (int i = 0; i < ConnectOutages.MAX_TARGETS + 10; i++) {
            outages.failed("many:" + i, "rejected");
        }
        assertTrue(outages.size() <= ConnectOutages.MAX_TARGETS, "outages kept: " + outages.size());
    }

    private static final class Quiet implements ClientConnectionLifeCycleListener {
        @Override
        public void connectionCreated(org.apache.activemq.artemis.core.server.ActiveMQComponent component,
                                      Connection connection,
                                      org.apache.activemq.artemis.spi.core.remoting.ClientProtocolManager protocol) {
        }

        @Override
        public void connectionDestroyed(Object connectionID, boolean failed) {
        }

        @Override
        public void connectionException(Object connectionID, ActiveMQException me) {
        }

        @Override
        public void connectionReadyForWrites(Object connectionID, boolean ready) {
        }
    }

    private static final class Echo implements ChannelHandler {
        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
        }
    }
}
