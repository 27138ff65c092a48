package dev.artemisrdma.it.compat;

import java.util.HashSet;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.zip.CRC32;

import io.micrometer.core.instrument.Metrics;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.utils.VersionLoader;

/**
 * A JMS client made from Artemis's API and the connector factory's class name only (it runs on an old build's jar or
 * this one's): on one connection, for each SIZExCOUNT, sends COUNT persistent messages of SIZE bytes to a queue,
 * receives them back, and checks that each arrived once with its content; then prints {@value #DONE} with what it
 * counted over all of them, the Artemis release its client classes come from, and the
 * {@link CompatMeters} of its own transport (Micrometer's global registry, where a build that has them publishes
 * its client meters), and keeps the connection open until told {@code exit}, so the broker can be asked about it.
 *
 * <p>Arguments: host, port, queue, then one or more SIZExCOUNT (e.g. {@code 1024x200 1048576x4}).
 */
public final class CompatClientMain {

    static final String DONE = "COMPAT CLIENT DONE ";
    private static final String CONNECTOR_FACTORY = "dev.artemisrdma.artemis.RdmaConnectorFactory";

    private CompatClientMain() {
    }

    public static void main(String[] args) throws Exception {
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        String queueName = args[2];
        // the global registry is a composite: without a registry in it, its meters read nothing
        Metrics.addRegistry(new SimpleMeterRegistry());
        try (ActiveMQConnectionFactory factory = new ActiveMQConnectionFactory(false,
                new TransportConfiguration(CONNECTOR_FACTORY, CompatParams.with(Map.of("host", host, "port", port))));
             Connection connection = factory.createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(queueName);
            MessageProducer producer = session.createProducer(queue);
            producer.setDeliveryMode(DeliveryMode.PERSISTENT);
            MessageConsumer consumer = session.createConsumer(queue);
            int sent = 0;
            int received = 0;
            int repeated = 0;
            int corrupt = 0;
            for (int a = 3; a < args.length; a++) {
                int size = Integer.parseInt(args[a].substring(0, args[a].indexOf('x')));
                int count = Integer.parseInt(args[a].substring(args[a].indexOf('x') + 1));
                for (int seq = 0; seq < count; seq++) {
                    byte[] body = body(seq, size);
                    BytesMessage m = session.createBytesMessage();
                    m.writeBytes(body);
                    m.setIntProperty("seq", seq);
                    m.setIntProperty("size", size);
                    m.setLongProperty("crc", crc(body));
                    producer.send(m);
                }
                sent += count;
                Set<Integer> seen = new HashSet<>();
                for (int i = 0; i < count; i++) {
                    BytesMessage m = (BytesMessage) consumer.receive(60_000);
                    if (m == null) {
                        break;
                    }
                    received++;
                    byte[] body = new byte[(int) m.getBodyLength()];
                    m.readBytes(body);
                    if (m.getIntProperty("size") != size || body.length != size
                            || crc(body) != m.getLongProperty("crc")) {
                        corrupt++;
                    }
                    if (!seen.add(m.getIntProperty("seq"))) {
                        repeated++;
                    }
                }
            }
            int extra = consumer.receive(500) == null ? 0 : 1;
            System.out.println(DONE + "sent=" + sent + " received=" + received + " repeated=" + repeated
                    + " corrupt=" + corrupt + " extra=" + extra + " artemis="
                    + VersionLoader.getVersion().getFullVersion() + " "
                    + CompatMeters.report(Metrics.globalRegistry, "artemis.rdma.client."));
            System.in.read(); // "exit", or the end of stdin
        }
        System.exit(0);
    }

    private static byte[] body(int seq, int size) {
        byte[] body = new byte[size];
        new Random(seq * 31L + size).nextBytes(body);
        return body;
    }

    private static long crc(byte[] body) {
        CRC32 crc = new CRC32();
        crc.update(body);
        return crc.getValue();
    }
}
