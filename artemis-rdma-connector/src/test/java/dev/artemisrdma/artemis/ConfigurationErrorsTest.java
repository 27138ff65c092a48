package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Hashtable;
import java.util.Map;

import javax.naming.Context;
import javax.naming.InitialContext;
import javax.naming.NamingException;

import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.config.impl.ConfigurationImpl;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.spi.core.protocol.ProtocolManager;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Refused configurations fail with messages that name what is wrong. */
class ConfigurationErrorsTest {

    @TempDir
    Path dataDir;

    @BeforeAll
    static void runtime() {
        TestRuntime.install();
    }

    private static Map<String, Object> params(Object... keyValues) {
        Map<String, Object> params = new HashMap<>();
        for (int i = 0; i < keyValues.length; i += 2) {
            params.put((String) keyValues[i], keyValues[i + 1]);
        }
        return params;
    }

    @Test
    void acceptorRefusesUnknownKeyNamingItAndTheValidOnes() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new RdmaAcceptorFactory().createAcceptor("rdma", null, params("host", "h", "recieveSlots", "8"),
                        null, null, null, null, Map.of("CORE", dummyCore()), "g", null));
        assertTrue(e.getMessage().contains("'recieveSlots'"), e.getMessage());
        assertTrue(e.getMessage().contains("receiveSlots"), e.getMessage());
        assertTrue(e.getMessage().contains("RDMA acceptor 'rdma'"), e.getMessage());
    }

    /** Issue 40: values Artemis's own parser took silently ("yes" as false) or refused with a bare exception. */
    @Test
    void acceptorRefusesBadBooleansDelaysAndPortsNamingTheKey() {
        Object[][] cases = {
            {"directDeliver", "yes", "directDeliver: expected true or false, got 'yes'"},
            {"batchDelay", "10ms", "batchDelay: not an integer: '10ms' (milliseconds, a whole number such as 10"},
            {"batchDelay", "-1", "batchDelay: must be 0..60000, got -1"},
            {"port", "70000", "port: must be 0..65535, got 70000"},
            {"port", "http", "port: not an integer: 'http'"},
        };
        for (Object[] c : cases) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> new RdmaAcceptorFactory().createAcceptor("rdma", null, params(c[0], c[1]), null, null, null,
                            null, Map.of("CORE", dummyCore()), "g", null), c[0] + "=" + c[1]);
            assertTrue(e.getMessage().contains((String) c[2]), c[0] + "=" + c[1] + ": " + e.getMessage());
        }
        assertThrows(IllegalArgumentException.class,
                () -> RdmaParameters.directDeliver(params("directDeliver", "yes")));
        assertTrue(RdmaParameters.directDeliver(params("directDeliver", "FALSE")) == false);
        assertTrue(RdmaParameters.directDeliver(params("directDeliver", Boolean.TRUE)));
        assertTrue(RdmaParameters.batchDelay(params("batchDelay", 5)) == 5);
        assertTrue(RdmaParameters.batchDelay(params("batchDelay", " 7 ")) == 7);
    }

    @Test
    void acceptorRefusesABadConnectionsAllowedNamingTheKey() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new RdmaAcceptorFactory().createAcceptor("rdma", null, params("connectionsAllowed", "0"),
                        null, null, null, null, Map.of("CORE", dummyCore()), "g", null));
        assertTrue(e.getMessage().startsWith("RDMA acceptor 'rdma': connectionsAllowed: must be -1"), e.getMessage());
    }

    @Test
    void acceptorRefusesAReceiveRegionThatWouldWrapNamingItsKeys() {
        // (127 + 1) x 16 MiB = 2 GiB: one more than an int holds, accepted before as a wrapped registration size
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new RdmaAcceptorFactory().createAcceptor("rdma", null, params("receiveSlots", "127",
                        "slotSize", "16MiB", "sharedReceiveQueue", "false"),
                        null, null, null, null, Map.of("CORE", dummyCore()), "g", null));
        assertTrue(e.getMessage().startsWith("RDMA acceptor 'rdma': receiveSlots (127) + 1 reserve x slotSize"
                + " (16777216)") && e.getMessage().contains("lower receiveSlots or slotSize"), e.getMessage());
    }

    @Test
    void acceptorRefusesProtocolsWithoutCore() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new RdmaAcceptorFactory().createAcceptor("rdma", null, params("protocols", "AMQP"),
                        null, null, null, null, Map.of(), "g", null));
        assertTrue(e.getMessage().contains("CORE"), e.getMessage());
        assertTrue(e.getMessage().contains("'AMQP'"), e.getMessage());
    }

    @Test
    void brokerSkipsAnAcceptorWithProtocolsWithoutCore() throws Exception {
        Configuration config = EmbeddedBroker.testable(new ConfigurationImpl(), dataDir);
        config.addAcceptorConfiguration(new TransportConfiguration(RdmaAcceptorFactory.class.getName(),
                params("host", "127.0.0.1", "port", 61721, "protocols", "AMQP"), "rdma"));
        try (EmbeddedBroker broker = EmbeddedBroker.start(config, null)) {
            assertNull(broker.server().getRemotingService().getAcceptor("rdma"), "refused acceptor was created");
        }
    }

    @Test
    void connectorRefusesUnknownKey() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new RdmaConnectorFactory().createConnector(params("host", "h", "slotsize", 1), null, null,
                        null, null, null, null));
        assertTrue(e.getMessage().contains("'slotsize'") && e.getMessage().contains("slotSize"), e.getMessage());
    }

    @Test
    void urlRefusesUnknownKeyAndKeepsClientOptions() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> RdmaConnectionFactories.create("rdma://127.0.0.1:61700?reconectAttempts=5"));
        assertTrue(e.getMessage().contains("'reconectAttempts'"), e.getMessage());
        assertTrue(e.getMessage().contains("receiveSlots") && e.getMessage().contains("reconnectAttempts"),
                e.getMessage());

        try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create(
                "rdma://10.0.0.9:61800?reconnectAttempts=7&receiveSlots=128&ha=true&type=QUEUE_CF")) {
            assertEquals(7, cf.getReconnectAttempts());
            assertTrue(cf.isHA());
            TransportConfiguration tc = cf.getStaticConnectors()[0];
            assertEquals(RdmaConnectorFactory.class.getName(), tc.getFactoryClassName());
            assertEquals(Map.of("host", "10.0.0.9", "port", 61800, "receiveSlots", "128"), tc.getParams());
        }
        assertThrows(IllegalArgumentException.class, () -> RdmaConnectionFactories.create("tcp://127.0.0.1:61616"));
    }

    @Test
    void jndiRefusesBadRdmaUrlWithItsReason() {
        Hashtable<String, Object> env = new Hashtable<>();
        env.put(Context.INITIAL_CONTEXT_FACTORY, RdmaInitialContextFactory.class.getName());
        env.put("connectionFactory.cf", "rdma://127.0.0.1:61700?bogus=1");
        NamingException e = assertThrows(NamingException.class, () -> new InitialContext(env));
        assertTrue(e.getMessage().contains("'bogus'") && e.getMessage().contains("connectionFactory.cf"),
                e.getMessage());
    }

    @Test
    void jndiDelegatesOtherUrls() throws Exception {
        Hashtable<String, Object> env = new Hashtable<>();
        env.put(Context.INITIAL_CONTEXT_FACTORY, RdmaInitialContextFactory.class.getName());
        env.put("connectionFactory.tcp", "tcp://127.0.0.1:61616?reconnectAttempts=2");
        InitialContext context = new InitialContext(env);
        ActiveMQConnectionFactory cf = (ActiveMQConnectionFactory) context.lookup("tcp");
        assertEquals(2, cf.getReconnectAttempts());
        assertTrue(cf.getStaticConnectors()[0].getFactoryClassName().contains("Netty"));
        context.close();
    }

    @Test
    void pluginNamingAMissingAcceptorStopsTheBroker() throws Exception {
        RdmaAcceptorPlugin plugin = new RdmaAcceptorPlugin();
        plugin.init(Map.of("acceptors", "rdma, nope"));
        assertEquals(java.util.List.of("rdma", "nope"), plugin.acceptors());
        Configuration config = EmbeddedBroker.testable(new ConfigurationImpl(), dataDir);
        config.addAcceptorConfiguration(new TransportConfiguration(
                "org.apache.activemq.artemis.core.remoting.impl.netty.NettyAcceptorFactory",
                params("host", "127.0.0.1", "port", 61722), "rdma"));
        config.registerBrokerPlugin(plugin);
        // the broker logs "AMQ224000: Failure in initialisation ... no acceptor named 'nope' ... acceptors are [rdma]"
        try (EmbeddedBroker broker = EmbeddedBroker.start(config, null)) {
            assertFalse(broker.server().isActive(), "broker went live with a misconfigured plugin");
            assertNull(broker.server().getRemotingService().getAcceptor("rdma"));
        }
    }

    @Test
    void pluginRefusesUnknownProperty() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new RdmaAcceptorPlugin().init(Map.of("acceptor", "rdma")));
        assertTrue(e.getMessage().contains("'acceptor'") && e.getMessage().contains("acceptors"), e.getMessage());
    }

    private static ProtocolManager dummyCore() {
        return (ProtocolManager) java.lang.reflect.Proxy.newProxyInstance(ProtocolManager.class.getClassLoader(),
                new Class<?>[] {ProtocolManager.class}, (proxy, method, args) -> null);
    }
}
