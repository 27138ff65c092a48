package dev.artemisrdma.it.demo;

import dev.artemisrdma.it.Lab;
import dev.artemisrdma.it.distro.ArtemisDistribution;
import dev.artemisrdma.it.distro.ArtemisInstance;
import dev.artemisrdma.it.distro.JndiClients;
import dev.artemisrdma.it.distro.ReadmeInstall;
import dev.artemisrdma.it.distro.RunningBroker;
import dev.artemisrdma.it.distro.RxeCounters;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.ConnectionFactory;
import jakarta.jms.DeliveryMode;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;

import javax.naming.InitialContext;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * The main job: the Apache Artemis distribution installed as README says (artemis create, the jars in lib/, the
 * RDMA acceptor and plugin in broker.xml), started with artemis run; a producer and a consumer configured from
 * config/jndi.properties, both over RDMA; prints progress, what flowed and how fast, then stops the broker.
 */
public final class RdmaDemo {

    private static final Consumer<String> QUIET = line -> { };
    /** The broker's console goes to a file; only its warnings and errors are shown. */
    private static final Consumer<String> BROKER_PROBLEMS = line -> {
        if (line.contains(" WARN ") || line.contains(" ERROR ")) {
            System.out.println("[broker] " + line);
        }
    };

    private RdmaDemo() {
    }

    public static void main(String[] args) throws Exception {
        int count = args.length > 0 ? Integer.parseInt(args[0]) : 50_000;
        int size = args.length > 1 ? Integer.parseInt(args[1]) : 1024;
        String host = Lab.addr0();
        ArtemisDistribution distribution = ArtemisDistribution.unpacked();
        ReadmeInstall readme = ReadmeInstall.read(ArtemisDistribution.projectRoot().resolve("README.md"));
        Path dir = Files.createTempDirectory("rdma-demo").resolve("broker");
        long t0 = System.nanoTime();
        say("creating a broker instance: apache-artemis-" + distribution.artemisVersion() + "/bin/artemis create "
                + dir);
        // C1 only: the lab's 2 vCPUs finish a one-minute job sooner without C2 compiling Artemis meanwhile
        List<String> c1 = List.of("-XX:TieredStopAtLevel=1");
        ArtemisInstance instance = distribution.create(dir, c1, c1, QUIET);
        readme.installWithBrokerXml(instance, distribution, host);
        say("installed as README says: " + String.join(" and ", readme.jarsFor(distribution.connectorVersion()))
                + " in lib/, " + readme.acceptorLineOn(host).strip() + " and RdmaAcceptorPlugin in etc/broker.xml ("
                + seconds(t0) + ")");
        Path console = Path.of(System.getenv().getOrDefault("RDMA_LAB_RESULTS", dir.toString()),
                "demo-broker-console.log");
        say("starting the broker: artemis run (console in " + console + ")");
        long t1 = System.nanoTime();
        int exit;
        try (RunningBroker broker = instance.run(console, BROKER_PROBLEMS)) {
            List<String> listening = broker.linesContaining("RDMA acceptor 'rdma' listening on");
            if (listening.isEmpty()) {
                fail("the broker is active but logged no RDMA acceptor");
            }
            say("broker active after " + seconds(t1) + ": "
                    + listening.get(0).substring(listening.get(0).indexOf("RDMA acceptor")));
            long received = exchange(count, size, host);
            if (received != count) {
                fail(received + " of " + count + " messages arrived");
            }
            say("stopping the broker: artemis stop");
            long t2 = System.nanoTime();
            exit = broker.stop(QUIET);
            say("broker stopped after " + seconds(t2) + ", artemis run exited with " + exit);
        }
        if (exit != 0) {
            fail("artemis run exited with " + exit + " (see " + console + ")");
        }
        say("OK");
        System.exit(0);
    }

    private static long exchange(int count, int size, String host) throws Exception {
        Properties jndi = JndiClients.load(host, RdmaDemo::say);
        InitialContext context = new InitialContext(jndi);
        ConnectionFactory cf = (ConnectionFactory) context.lookup("ConnectionFactory");
        Queue queue = (Queue) context.lookup("queue/orders");
        say("clients from config/jndi.properties: " + jndi.getProperty(JndiClients.FACTORY));
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) 'r');
        int step = Math.max(1, count / 10);
        AtomicLong received = new AtomicLong();
        RxeCounters before = RxeCounters.now();
        try (Connection consumerConnection = cf.createConnection();
             Connection producerConnection = cf.createConnection()) {
            Session consumerSession = consumerConnection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageConsumer consumer = consumerSession.createConsumer(queue);
            consumerConnection.start();
            Session producerSession = producerConnection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = producerSession.createProducer(queue);
            producer.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
            long start = System.nanoTime();
            Thread consumerThread = new Thread(() -> {
                try {
                    for (int i = 0; i < count; i++) {
                        BytesMessage m = (BytesMessage) consumer.receive(30_000);
                        if (m == null || m.getIntProperty("seq") != i || m.getBodyLength() != size) {
                            say("FAILED at message " + i + (m == null ? ": nothing arrived within 30 s" : ""));
                            return;
                        }
                        if (received.incrementAndGet() % step == 0) {
                            say("consumed " + received.get() + "/" + count);
                        }
                    }
                } catch (Exception e) {
                    say("consumer failed: " + e);
                }
            }, "demo-consumer");
            consumerThread.start();
            say("producing " + count + " messages of " + size + " B, consuming them at the same time");
            for (int i = 0; i < count; i++) {
                BytesMessage m = producerSession.createBytesMessage();
                m.writeBytes(body);
                m.setIntProperty("seq", i);
                producer.send(m);
                if ((i + 1) % step == 0) {
                    say("produced " + (i + 1) + "/" + count);
                }
            }
            long sent = System.nanoTime();
            consumerThread.join();
            long end = System.nanoTime();
            double secs = (end - start) / 1e9;
            double mib = received.get() * (double) size / 1048576;
            System.out.printf(Locale.ROOT, "demo: producer sent %d messages of %d B in %.2f s%n", count, size,
                    (sent - start) / 1e9);
            System.out.printf(Locale.ROOT, "demo: consumer received %d messages (%.1f MiB) in %.2f s: %.0f msg/s, "
                    + "%.1f MiB/s, over RDMA%n", received.get(), mib, secs, received.get() / secs, mib / secs);
        }
        say("rxe counters while the clients ran: " + RxeCounters.now().since(before));
        ((AutoCloseable) cf).close();
        context.close();
        return received.get();
    }

    private static String seconds(long since) {
        return String.format(Locale.ROOT, "%.1f s", (System.nanoTime() - since) / 1e9);
    }

    private static void say(String line) {
        System.out.println("demo: " + line);
    }

    private static void fail(String why) {
        say("FAILED: " + why);
        System.exit(1);
    }
}
