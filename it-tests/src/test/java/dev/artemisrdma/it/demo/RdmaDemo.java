package dev.artemisrdma.it.demo;

import dev.artemisrdma.it.artemis.LabBroker;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.ConnectionFactory;
import jakarta.jms.DeliveryMode;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;

import javax.naming.InitialContext;
import java.io.InputStream;
import java.nio.file.Files;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The main job: a broker from config/broker.xml with its RDMA acceptor, a producer and a consumer configured from
 * config/jndi.properties, both over RDMA; prints what flowed and how fast.
 */
public final class RdmaDemo {

    private RdmaDemo() {
    }

    public static void main(String[] args) throws Exception {
        int count = args.length > 0 ? Integer.parseInt(args[0]) : 50_000;
        int size = args.length > 1 ? Integer.parseInt(args[1]) : 1024;
        String host = System.getenv().getOrDefault("RDMA_LAB_ADDR0", "10.77.0.1");
        System.out.println("demo: starting a broker from config/broker.xml, RDMA acceptor on " + host + ":61700");
        try (LabBroker broker = LabBroker.start(host, 61700, Files.createTempDirectory("demo-broker"), true, 0)) {
            Properties jndi = new Properties();
            try (InputStream in = Files.newInputStream(LabBroker.configDir().resolve("jndi.properties"))) {
                jndi.load(in);
            }
            InitialContext context = new InitialContext(jndi);
            ConnectionFactory cf = (ConnectionFactory) context.lookup("ConnectionFactory");
            Queue queue = (Queue) context.lookup("queue/orders");
            System.out.println("demo: clients from config/jndi.properties: "
                    + jndi.getProperty("connectionFactory.ConnectionFactory"));
            byte[] body = new byte[size];
            Arrays.fill(body, (byte) 'r');
            AtomicLong received = new AtomicLong();
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
                                System.out.println("demo: FAILED at message " + i);
                                return;
                            }
                            received.incrementAndGet();
                        }
                    } catch (Exception e) {
                        System.out.println("demo: consumer failed: " + e);
                    }
                }, "demo-consumer");
                consumerThread.start();
                for (int i = 0; i < count; i++) {
                    BytesMessage m = producerSession.createBytesMessage();
                    m.writeBytes(body);
                    m.setIntProperty("seq", i);
                    producer.send(m);
                }
                long sent = System.nanoTime();
                consumerThread.join();
                long end = System.nanoTime();
                double seconds = (end - start) / 1e9;
                System.out.printf(Locale.ROOT, "demo: producer sent %d messages of %d B in %.2f s%n", count, size,
                        (sent - start) / 1e9);
                System.out.printf(Locale.ROOT, "demo: consumer received %d messages (%.1f MiB) in %.2f s: %.0f msg/s, "
                        + "%.1f MiB/s, over RDMA%n", received.get(), received.get() * (double) size / 1048576, seconds,
                        received.get() / seconds, received.get() * (double) size / 1048576 / seconds);
            }
            context.close();
            if (received.get() != count) {
                System.out.println("demo: FAILED: " + received.get() + " of " + count + " messages arrived");
                System.exit(1);
            }
            System.out.println("demo: OK");
        }
        System.exit(0);
    }
}
