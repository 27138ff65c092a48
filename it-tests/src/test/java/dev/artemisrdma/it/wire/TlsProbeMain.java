package dev.artemisrdma.it.wire;

import java.util.Arrays;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.MessageConsumer;
import jakarta.jms.Session;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;

/**
 * One JMS round trip through the broker: connects to the URL, sends a message whose body is {@link #pattern()} to the
 * queue and takes it back. Prints {@code SERVED} when the body came back whole, or {@code REFUSED} and the exception's
 * chain of messages, then exits. Arguments: the {@code rdma://} URL and the queue.
 */
public final class TlsProbeMain {

    private TlsProbeMain() {
    }

    /** 1 KiB that no protocol header or random stream produces: what a capture of the wire looks for. */
    public static byte[] pattern() {
        byte[] p = new byte[1024];
        byte[] word = "ARTEMIS-RDMA-PLAINTEXT-PATTERN-".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        for (int i = 0; i < p.length; i++) {
            p[i] = word[i % word.length];
        }
        return p;
    }

    public static void main(String[] args) {
        System.out.println(roundTrip(args[0], args[1]));
        System.out.flush();
        System.exit(0);
    }

    /**
     * One round trip through {@code url} ({@code rdma://}, or Artemis's own {@code tcp://} for the Netty side of a
     * comparison) on {@code queue}: {@code SERVED}, {@code BROKEN ...} or {@code REFUSED} and the exception's chain of
     * messages.
     */
    static String roundTrip(String url, String queueName) {
        try (ActiveMQConnectionFactory cf = url.startsWith("tcp://") ? new ActiveMQConnectionFactory(url)
                : RdmaConnectionFactories.create(url);
             Connection connection = cf.createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            var queue = session.createQueue(queueName);
            MessageConsumer consumer = session.createConsumer(queue);
            BytesMessage m = session.createBytesMessage();
            m.writeBytes(pattern());
            session.createProducer(queue).send(m);
            BytesMessage back = (BytesMessage) consumer.receive(30_000);
            byte[] body = new byte[back == null ? 0 : (int) back.getBodyLength()];
            if (back != null) {
                back.readBytes(body);
            }
            return Arrays.equals(body, pattern()) ? "SERVED" : "BROKEN body of " + body.length + " bytes";
        } catch (Exception e) {
            StringBuilder chain = new StringBuilder();
            for (Throwable t = e; t != null; t = t.getCause()) {
                chain.append(" | ").append(t);
            }
            return "REFUSED" + chain;
        }
    }
}
