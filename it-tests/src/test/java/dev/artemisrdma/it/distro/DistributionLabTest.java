package dev.artemisrdma.it.distro;

import dev.artemisrdma.it.Lab;
import dev.artemisrdma.it.artemis.LabBroker;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.ConnectionFactory;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import javax.naming.InitialContext;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The operator's path, end to end: the Apache Artemis binary distribution, {@code artemis create}, the jars README
 * names copied into the instance's {@code lib/}, README's broker.xml lines (or config/broker.properties) applied,
 * {@code artemis run}, a JMS client configured by config/jndi.properties producing and consuming over RDMA,
 * {@code artemis queue stat} over the instance's TCP acceptor, {@code artemis stop}. README is read, not copied:
 * when its instructions are not enough, this test fails and README must be fixed.
 */
@Timeout(value = 15, unit = TimeUnit.MINUTES)
class DistributionLabTest {

    /** Modest: every step here starts a JVM in the emulated lab; the demo is the place for volume. */
    private static final int MESSAGES = 200;
    private static final int SIZE = 1024;
    private static final String QUEUE = "orders";
    /** The lab has 2 vCPUs: C2 compiling the broker competes with everything else (see run-lab-tests). */
    private static final String LAB_JIT = "-XX:TieredStopAtLevel=1";

    private static final Consumer<String> CLI_OUT = line -> System.out.println("[artemis] " + line);
    private static final Consumer<String> BROKER_OUT = line -> System.out.println("[broker] " + line);

    private static ArtemisDistribution distribution;
    private static ReadmeInstall readme;
    /** One instance for both tests: artemis create costs a minute in the lab; each test sets its configuration. */
    private static ArtemisInstance instance;

    @BeforeAll
    static void createInstance(@TempDir Path tmp) throws Exception {
        distribution = ArtemisDistribution.unpacked();
        readme = ReadmeInstall.read(ArtemisDistribution.projectRoot().resolve("README.md"));
        System.out.println("README's jars: " + readme.jarsFor(distribution.connectorVersion()));
        System.out.println("README's acceptor: " + readme.acceptorLine() + " (host " + readme.acceptorHost()
                + " replaced by the lab's " + Lab.addr0() + ")");
        // config/broker.properties binds ${rdma.host:10.77.0.1}: the property makes that the lab's address either way
        instance = distribution.create(tmp.resolve("broker"), List.of(LAB_JIT, "-Drdma.host=" + Lab.addr0()),
                List.of(LAB_JIT), CLI_OUT);
        // the archive's lib/ holds exactly what README says to copy, no more (nothing Artemis already ships)
        try (var files = java.nio.file.Files.list(distribution.jarDir())) {
            assertEquals(new java.util.TreeSet<>(readme.jarsFor(distribution.connectorVersion())),
                    files.map(f -> f.getFileName().toString()).collect(java.util.stream.Collectors.toCollection(
                            java.util.TreeSet::new)), "the release archive's lib/ against README's Broker section");
        }
        readme.installJars(instance, distribution);
    }

    @Test
    void brokerXmlChangeFromReadme() throws Exception {
        instance.resetConfiguration();
        instance.addToBrokerXml(readme.acceptorLineOn(Lab.addr0()), readme.pluginBlock());
        produceAndConsumeOverRdma("broker-xml");
    }

    @Test
    void brokerPropertiesFromConfig() throws Exception {
        assertTrue(readme.section().contains("config/broker.properties")
                && readme.section().contains("etc/broker.properties"), "README's Broker section tells to copy "
                + "config/broker.properties to the instance's etc/broker.properties");
        instance.resetConfiguration();
        instance.addBrokerProperties(LabBroker.configDir().resolve("broker.properties"));
        produceAndConsumeOverRdma("broker-properties");
    }

    private static void assertStopped(RunningBroker broker) {
        assertEquals(List.of(), broker.linesContaining(" ERROR "), "the broker logged no error");
        assertFalse(broker.linesContaining(RunningBroker.STOPPED).isEmpty(), "the broker logs that it stopped");
        assertTrue(broker.linesContaining("RDMA acceptor 'rdma' on").stream().anyMatch(l -> l.contains("stopped")),
                "the RDMA acceptor logs that it stopped");
    }

    /** artemis run, a producer, queue stat, a consumer, artemis stop. */
    private static void produceAndConsumeOverRdma(String name) throws Exception {
        try (RunningBroker broker = instance.run(consoleLog(name), BROKER_OUT)) {
            List<String> listening = broker.linesContaining("RDMA acceptor 'rdma' listening on");
            assertEquals(1, listening.size(), "the broker logs its RDMA acceptor once");
            assertTrue(listening.get(0).contains(Lab.addr0() + ":61700"), listening.get(0));

            Properties jndi = JndiClients.load(Lab.addr0(), System.out::println);
            InitialContext context = new InitialContext(jndi);
            ConnectionFactory factory = (ConnectionFactory) context.lookup("ConnectionFactory");
            Queue queue = (Queue) context.lookup("queue/" + QUEUE);
            byte[] body = new byte[SIZE];
            Arrays.fill(body, (byte) 'd');

            RxeCounters start = RxeCounters.now();
            produce(factory, queue, body);
            RxeCounters produced = RxeCounters.now().since(start);
            System.out.println(name + ": producing " + MESSAGES + " messages moved rxe by " + produced);

            Map<String, String> stat = instance.queueStat(QUEUE, CLI_OUT);
            assertEquals(Integer.toString(MESSAGES), stat.get("MESSAGE_COUNT"), "queue stat: " + stat);
            assertEquals(Integer.toString(MESSAGES), stat.get("MESSAGES_ADDED"), "queue stat: " + stat);

            RxeCounters beforeConsuming = RxeCounters.now();
            consume(factory, queue, body);
            RxeCounters consumed = RxeCounters.now().since(beforeConsuming);
            System.out.println(name + ": consuming " + MESSAGES + " messages moved rxe by " + consumed);
            ((AutoCloseable) factory).close();
            context.close();

            // every message crossed the RDMA device, once to the broker and once to the consumer: a client that had
            // fallen back to TCP would leave these counters where they were
            assertTrue(produced.sentPackets() >= MESSAGES && produced.receivedPackets() >= MESSAGES,
                    "producing: " + produced);
            assertTrue(consumed.sentPackets() >= MESSAGES && consumed.receivedPackets() >= MESSAGES,
                    "consuming: " + consumed);

            // artemis stop, not SIGTERM (what artemis-service stop sends): after SIGTERM the broker logged nothing
            // in the lab, not even that it stopped, so a clean stop could not be told from a kill
            assertEquals(0, broker.stop(CLI_OUT), "artemis run exits 0 after artemis stop");
            assertStopped(broker);
        }
    }

    private static void produce(ConnectionFactory factory, Queue queue, byte[] body) throws Exception {
        try (Connection connection = factory.createConnection()) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = session.createProducer(queue);
            for (int i = 0; i < MESSAGES; i++) {
                BytesMessage message = session.createBytesMessage();
                message.writeBytes(body);
                message.setIntProperty("seq", i);
                producer.send(message);
            }
        }
    }

    private static void consume(ConnectionFactory factory, Queue queue, byte[] body) throws Exception {
        try (Connection connection = factory.createConnection()) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer consumer = session.createConsumer(queue);
            connection.start();
            List<Integer> wrong = new ArrayList<>();
            for (int i = 0; i < MESSAGES; i++) {
                BytesMessage message = (BytesMessage) consumer.receive(30_000);
                assertNotNull(message, "message " + i + " of " + MESSAGES + " did not arrive");
                byte[] received = new byte[(int) message.getBodyLength()];
                message.readBytes(received);
                assertArrayEquals(body, received, "body of message " + i);
                if (message.getIntProperty("seq") != i) {
                    wrong.add(i);
                }
            }
            assertTrue(wrong.isEmpty(), "messages out of order at " + wrong);
            assertNull(consumer.receiveNoWait(), "no more messages than were sent");
        }
    }

    private static Path consoleLog(String name) {
        String results = System.getenv("RDMA_LAB_RESULTS");
        Path dir = results == null ? instance.dir().resolve("log") : Path.of(results, "distribution");
        return dir.resolve(name + "-console.log");
    }
}
