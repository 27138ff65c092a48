package dev.artemisrdma.it.osgi;

import java.io.File;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.it.Lab;
import dev.artemisrdma.it.RdmaResources;
import dev.artemisrdma.transport.fabric.FabricListener;
import dev.artemisrdma.transport.verbs.VerbsFabric;
import jakarta.jms.Connection;
import jakarta.jms.MessageConsumer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.osgi.framework.Bundle;
import org.osgi.framework.wiring.BundleWire;
import org.osgi.framework.wiring.BundleWiring;

import static dev.artemisrdma.it.osgi.Felix.call;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Artemis 2.43.0 as OSGi bundles in Apache Felix 7 (SCR, Config Admin), our bundle installed beside it, a broker whose
 * configuration declares an RDMA acceptor, and a JMS client outside the framework (Artemis 2.56 jakarta client and
 * this project's connector on the test class path) sending and receiving through it; then our bundle refreshed and
 * uninstalled, with the acceptor gone and the kernel's RDMA resources back where they were.
 *
 * <p>Runs in the Soft-RoCE lab and fails there (does not skip) without an RDMA device. With
 * {@code -Dartemis.rdma.osgi.hostcheck=true} it runs on a machine without RDMA and checks everything up to the
 * point where a device is needed: the bundle set resolves, the broker starts and serves JMS over TCP, our bundle
 * is active and tries to start the configured acceptor (and fails for want of a device), the native shim loads from
 * the bundle, and refresh and uninstall leave the broker running without any of our classes.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class OsgiBrokerRdmaTest {

    static final boolean HOST_CHECK = Boolean.getBoolean("artemis.rdma.osgi.hostcheck");
    private static final String FACTORY = "dev.artemisrdma.artemis.RdmaAcceptorFactory";
    private static final String PREFIX = "brokerconfig.acceptorConfigurations.rdma.";

    @TempDir
    Path work;

    private final List<String> systemProperties = new ArrayList<>();
    private Felix felix;
    private int tcpPort;
    private int rdmaPort;
    private RdmaResources baseline;

    @BeforeEach
    void requireRdmaUnlessHostCheck() throws Exception {
        if (!HOST_CHECK) {
            String[] devices = new File("/sys/class/infiniband").list();
            if (devices == null || devices.length == 0) {
                fail("no RDMA device (/sys/class/infiniband is empty): this test runs in the Soft-RoCE lab "
                        + "(it-tests/lab/run-lab-tests); on a machine without RDMA run it with "
                        + "-Dartemis.rdma.osgi.hostcheck=true, which checks everything short of RDMA");
            }
            baseline = RdmaResources.afterWarmUp();
        }
        tcpPort = Lab.freshPort();
        rdmaPort = Lab.freshPort();
    }

    @AfterEach
    void tearDown() throws Exception {
        try {
            if (felix != null) {
                felix.close();
            }
        } finally {
            systemProperties.forEach(System::clearProperty);
        }
    }

    /**
     * The recommended set-up: no fragment. The broker cannot load the factory by name (it logs AMQ222080 for the
     * acceptor and starts without it); our activator creates and starts it from the configuration.
     */
    @Test
    void brokerServesJmsOverRdmaAndOurBundleRefreshesAndUninstallsCleanly() throws Exception {
        declareRdmaAcceptorByBrokerProperties();
        felix = Felix.start(work, Felix.bundles(work, false));
        felix.configureBroker(brokerXml(""), "osgi");
        Object server = felix.awaitBroker(Duration.ofSeconds(120));
        assertEquals(List.of(), felix.notActive(), "every bundle active (fragments resolved)");
        Bundle ours = felix.bundle(Felix.OUR_BUNDLE);
        assertEquals("2.43.0", felix.bundle(Felix.BROKER_BUNDLE).getVersion().toString());
        assertFactoryLoadsFromOurBundle(ours);
        assertNativeShimLoadsFromOurBundle(ours);
        assertEquals("tcp", roundTrip("org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory",
                "127.0.0.1", tcpPort, "tcp"), "JMS over the broker's TCP acceptor");

        Object first = ourAcceptorOrNull(server, ours);
        if (HOST_CHECK) {
            assertNull(first, "no RDMA device here: the activator's attempt to start the acceptor failed");
        } else {
            assertNotNull(first, "the activator started RDMA acceptor 'rdma'; acceptors: " + acceptors(server));
            assertTrue((Boolean) call(first, "isStarted"));
            assertEquals("over rdma", roundTrip("dev.artemisrdma.artemis.RdmaConnectorFactory", Lab.addr1(),
                    rdmaPort, "over rdma"), "JMS from outside the framework through the RDMA acceptor");
        }

        // refresh: only our bundle restarts (nothing is wired to it), the broker keeps running
        ClassLoader firstLoader = ours.adapt(BundleWiring.class).getClassLoader();
        felix.refresh(ours);
        Bundle refreshed = felix.bundle(Felix.OUR_BUNDLE);
        assertEquals(Bundle.ACTIVE, refreshed.getState());
        assertSame(server, felix.brokerOrNull(), "the broker was not restarted by our refresh");
        assertTrue((Boolean) call(server, "isStarted"));
        assertNothingFrom(server, firstLoader);
        Object second = ourAcceptorOrNull(server, refreshed);
        if (!HOST_CHECK) {
            assertNotNull(second, "the refreshed bundle started the acceptor again: " + acceptors(server));
            assertNotSame(first, second);
            assertEquals("after refresh", roundTrip("dev.artemisrdma.artemis.RdmaConnectorFactory", Lab.addr1(),
                    rdmaPort, "after refresh"));
        }

        // uninstall: the acceptor goes, the broker stays, nothing of ours is left in it
        ClassLoader secondLoader = refreshed.adapt(BundleWiring.class).getClassLoader();
        refreshed.uninstall();
        felix.refresh();
        assertNull(felix.bundle(Felix.OUR_BUNDLE));
        assertTrue((Boolean) call(server, "isStarted"), "the broker runs on without us");
        assertNothingFrom(server, secondLoader);
        assertEquals("tcp after uninstall", roundTrip(
                "org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory", "127.0.0.1", tcpPort,
                "tcp after uninstall"));
        if (!HOST_CHECK) {
            assertRdmaReleased();
        }
    }

    /**
     * The host fragment lets the broker load the factory by name while it starts (no AMQ222080): the broker bundle
     * gets a dynamic wire to our exported package.
     */
    @Test
    void hostFragmentLetsTheBrokerLoadTheFactoryByName() throws Exception {
        declareRdmaAcceptorByBrokerProperties();
        felix = Felix.start(work, Felix.bundles(work, true));
        felix.configureBroker(brokerXml(""), "osgi");
        Object server = felix.awaitBroker(Duration.ofSeconds(120));
        assertEquals(List.of(), felix.notActive(), "every bundle active (fragments resolved)");
        Bundle host = felix.bundle(Felix.BROKER_BUNDLE);
        Bundle ours = felix.bundle(Felix.OUR_BUNDLE);
        List<String> fragments = host.adapt(BundleWiring.class).getProvidedWires("osgi.wiring.host").stream()
                .map(w -> w.getRequirer().getSymbolicName()).toList();
        assertEquals(List.of(Felix.OUR_FRAGMENT), fragments, "our fragment is attached to the broker bundle");
        boolean wired = false;
        for (BundleWire wire : host.adapt(BundleWiring.class).getRequiredWires("osgi.wiring.package")) {
            if ("dev.artemisrdma.artemis".equals(wire.getCapability().getAttributes().get("osgi.wiring.package"))) {
                assertEquals(ours, wire.getProvider().getBundle());
                wired = true;
            }
        }
        assertTrue(wired, "the broker loaded dev.artemisrdma.artemis from our bundle while starting");
        Object factory = cachedFactory(server, "rdma");
        assertNotNull(factory, "the broker instantiated the configured factory by name");
        assertSame(ours.adapt(BundleWiring.class).getClassLoader(), factory.getClass().getClassLoader());
        if (!HOST_CHECK) {
            assertNotNull(ourAcceptorOrNull(server, ours), "acceptors: " + acceptors(server));
            assertEquals("fragment", roundTrip("dev.artemisrdma.artemis.RdmaConnectorFactory", Lab.addr1(), rdmaPort,
                    "fragment"));
        }
        // stopping our bundle takes the acceptor and the cached factory out of the running broker
        ours.stop();
        assertNothingFrom(server, ours.adapt(BundleWiring.class).getClassLoader());
        assertTrue((Boolean) call(server, "isStarted"));
        if (!HOST_CHECK) {
            assertRdmaReleased();
        }
    }

    private void declareRdmaAcceptorByBrokerProperties() {
        Map<String, String> props = new HashMap<>();
        props.put(PREFIX + "factoryClassName", FACTORY);
        props.put(PREFIX + "params.host", HOST_CHECK ? "127.0.0.1" : Lab.addr1());
        props.put(PREFIX + "params.port", Integer.toString(rdmaPort));
        props.forEach((k, v) -> {
            System.setProperty(k, v);
            systemProperties.add(k);
        });
    }

    private Path brokerXml(String extra) throws Exception {
        Path xml = work.resolve("broker.xml");
        Files.writeString(xml, """
                <configuration xmlns="urn:activemq" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
                               xsi:schemaLocation="urn:activemq /schema/artemis-configuration.xsd">
                   <core xmlns="urn:activemq:core">
                      <name>osgi</name>
                      <persistence-enabled>false</persistence-enabled>
                      <security-enabled>false</security-enabled>
                      <acceptors>
                         <acceptor name="core">tcp://127.0.0.1:%d?protocols=CORE</acceptor>
                      </acceptors>
                      %s
                   </core>
                </configuration>
                """.formatted(tcpPort, extra));
        return xml;
    }

    private static void assertFactoryLoadsFromOurBundle(Bundle ours) throws Exception {
        Class<?> factory = ours.loadClass(FACTORY);
        assertSame(ours.adapt(BundleWiring.class).getClassLoader(), factory.getClassLoader());
        Class<?> spi = ours.loadClass("org.apache.activemq.artemis.spi.core.remoting.AcceptorFactory");
        assertEquals(Felix.BROKER_BUNDLE, org.osgi.framework.FrameworkUtil.getBundle(spi).getSymbolicName(),
                "the SPI comes from artemis-server-osgi 2.43.0");
        assertTrue(spi.isAssignableFrom(factory));
    }

    /** The .so inside the bundle, extracted by JNA with the bundle's class loader (as the verbs binding does). */
    private static void assertNativeShimLoadsFromOurBundle(Bundle ours) throws Exception {
        Class<?> libraries = ours.loadClass("dev.artemisrdma.verbs.NativeLibraries");
        var shim = libraries.getDeclaredMethod("shim");
        shim.setAccessible(true);
        Object library = shim.invoke(null);
        String file = call(library, "getFile").toString();
        assertTrue(new File(file).isFile(), "shim extracted to a file: " + file);
        Class<?> jna = ours.loadClass("com.sun.jna.Native");
        assertEquals("com.sun.jna", org.osgi.framework.FrameworkUtil.getBundle(jna).getSymbolicName(),
                "JNA comes from the JNA bundle");
    }

    private static Map<?, ?> acceptors(Object server) throws Exception {
        return (Map<?, ?>) call(call(server, "getRemotingService"), "getAcceptors");
    }

    private static Object ourAcceptorOrNull(Object server, Bundle bundle) throws Exception {
        ClassLoader loader = bundle.adapt(BundleWiring.class).getClassLoader();
        for (Object acceptor : acceptors(server).values()) {
            if (acceptor.getClass().getClassLoader() == loader) {
                return acceptor;
            }
        }
        return null;
    }

    private static Object cachedFactory(Object server, String name) throws Exception {
        Object registry = call(server, "getServiceRegistry");
        var field = registry.getClass().getDeclaredField("acceptorFactories");
        field.setAccessible(true);
        return ((Map<?, ?>) field.get(registry)).get(name);
    }

    /** No acceptor, cached factory or broker plugin defined by {@code loader} (an old revision of ours) is left. */
    private static void assertNothingFrom(Object server, ClassLoader loader) throws Exception {
        for (Object acceptor : acceptors(server).values()) {
            assertFalse(acceptor.getClass().getClassLoader() == loader, "acceptor left in the broker: " + acceptor);
        }
        Object registry = call(server, "getServiceRegistry");
        var field = registry.getClass().getDeclaredField("acceptorFactories");
        field.setAccessible(true);
        for (Object factory : ((Map<?, ?>) field.get(registry)).values()) {
            assertFalse(factory.getClass().getClassLoader() == loader, "factory left in the broker: " + factory);
        }
        for (Object plugin : (List<?>) call(server, "getBrokerPlugins")) {
            assertFalse(plugin.getClass().getClassLoader() == loader, "plugin left in the broker: " + plugin);
        }
    }

    /** Kernel RDMA objects back at the baseline, and the acceptor's address free to listen on again. */
    private void assertRdmaReleased() throws Exception {
        RdmaResources now = RdmaResources.awaitEqual(baseline, 20_000);
        assertEquals(baseline, now, "every RDMA resource released (rdma resource show)");
        try (VerbsFabric fabric = new VerbsFabric();
             FabricListener listener = fabric.listen(new InetSocketAddress(Lab.addr1(), rdmaPort),
                     request -> request.reject(new byte[0]))) {
            assertEquals(rdmaPort, listener.localAddress().getPort(), "the RDMA port is free again");
        }
        assertEquals(baseline, RdmaResources.awaitEqual(baseline, 20_000));
    }

    /** One message sent and received from outside the framework; returns its text. */
    private static String roundTrip(String connectorFactory, String host, int port, String text) throws Exception {
        TransportConfiguration transport = new TransportConfiguration(connectorFactory,
                Map.of("host", host, "port", port));
        try (ActiveMQConnectionFactory cf = new ActiveMQConnectionFactory(false, transport);
             Connection connection = cf.createConnection()) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue("osgi." + text.replace(' ', '-'));
            MessageConsumer consumer = session.createConsumer(queue);
            connection.start();
            session.createProducer(queue).send(session.createTextMessage(text));
            TextMessage received = (TextMessage) consumer.receive(30_000);
            assertNotNull(received, "no message back through " + connectorFactory + " " + host + ":" + port);
            return received.getText();
        }
    }
}
