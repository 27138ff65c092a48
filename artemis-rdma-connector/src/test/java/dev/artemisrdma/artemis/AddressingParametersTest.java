package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.config.impl.ConfigurationImpl;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** IPv6 hosts, device= and tos= as acceptors, connectors and rdma:// URLs take them (on the fake fabric). */
class AddressingParametersTest {

    @BeforeAll
    static void runtime() {
        TestRuntime.install();
    }

    @Test
    void ipv6UrlsGiveTheHostWithoutBracketsAndPassDeviceAndTos() {
        try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create(
                "rdma://[fd00::1]:61800?device=rxe0&tos=106&reconnectAttempts=3#rdma://[fd00::2]")) {
            TransportConfiguration[] connectors = cf.getStaticConnectors();
            assertEquals(Map.of("host", "fd00::1", "port", 61800, "device", "rxe0", "tos", "106"),
                    connectors[0].getParams());
            assertEquals(Map.of("host", "fd00::2", "port", 61700, "device", "rxe0", "tos", "106"),
                    connectors[1].getParams());
            assertEquals(3, cf.getReconnectAttempts());
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> RdmaConnectionFactories.create("rdma://fd00::1:61700"));
        assertTrue(e.getMessage().contains("rdma://[fd00::1]:61700"), e.getMessage());
    }

    @Test
    void badTosAndDeviceAreRefusedByConnectorAndAcceptorNamingTheKey() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new RdmaConnectorFactory().createConnector(Map.<String, Object>of("host", "[fd00::1]", "tos", "300"), null,
                        null, null, null, null, null));
        assertTrue(e.getMessage().contains("tos: must be 0..255"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> new RdmaAcceptorFactory().createAcceptor("rdma", null,
                Map.<String, Object>of("host", "::", "device", "rxe 0"), null, null, null, null, Map.of(), "g", null));
        assertTrue(e.getMessage().contains("RDMA acceptor 'rdma'") && e.getMessage().contains("device: not an RDMA "
                + "device name: 'rxe 0'"), e.getMessage());
    }

    @Test
    void theDeviceStaysOnItsMachineAndBracketsDoNotMakeAnotherEndpoint() {
        Map<String, Object> acceptor = Map.<String, Object>of("host", "[fd00::1]", "port", 61700, "device", "rxe0", "tos", "32");
        Map<String, Object> forClients = RdmaParameters.connectorParams(acceptor);
        assertEquals(Map.of("host", "fd00::1", "port", 61700, "tos", "32"), forClients);
        assertTrue(RdmaParameters.sameEndpoint(acceptor, Map.<String, Object>of("host", "fd00::1", "port", 61700)));
        assertTrue(RdmaParameters.sameEndpoint(Map.<String, Object>of("host", "[::1]"), Map.<String, Object>of("host", "localhost")));
        assertFalse(RdmaParameters.sameEndpoint(acceptor, Map.<String, Object>of("host", "fd00::2", "port", 61700)));
    }

    @Test
    void aBrokerOnAnIpv6AcceptorWithDeviceAndTosServesAJmsClientFromAnRdmaUrl(@TempDir Path dataDir)
            throws Exception {
        int port = 61741;
        Configuration config = EmbeddedBroker.testable(new ConfigurationImpl(), dataDir);
        config.addAcceptorConfiguration(new TransportConfiguration(RdmaAcceptorFactory.class.getName(),
                new HashMap<>(Map.<String, Object>of("host", "[::1]", "port", port, "device", "fake0", "tos", "46")), "rdma6"));
        try (EmbeddedBroker broker = EmbeddedBroker.start(config, null);
             ActiveMQConnectionFactory cf = RdmaConnectionFactories.create("rdma://[::1]:" + port
                     + "?device=fake0&tos=46")) {
            assertTrue(broker.server().getRemotingService().getAcceptor("rdma6").isStarted());
            JmsScenarios.queueRoundTrip(cf, "ipv6.queue", 50);
        }
    }

    @Test
    void anAcceptorNamingAMissingDeviceDoesNotStartAndSaysWhichDevicesThereAre(@TempDir Path dataDir)
            throws Exception {
        Configuration config = EmbeddedBroker.testable(new ConfigurationImpl(), dataDir);
        config.addAcceptorConfiguration(new TransportConfiguration(RdmaAcceptorFactory.class.getName(),
                new HashMap<>(Map.<String, Object>of("host", "0.0.0.0", "port", 61742, "device", "rxe7")), "rdma"));
        try (EmbeddedBroker broker = EmbeddedBroker.start(config, null)) {
            RdmaAcceptor acceptor = (RdmaAcceptor) broker.server().getRemotingService().getAcceptor("rdma");
            assertFalse(acceptor != null && acceptor.isStarted(), "acceptor on a missing device started");
            IllegalStateException e = assertThrows(IllegalStateException.class, acceptor::start);
            assertTrue(e.getMessage().contains("no RDMA device named 'rxe7'")
                    && e.getMessage().contains("[fake0]"), e.getMessage());
        }
    }
}
