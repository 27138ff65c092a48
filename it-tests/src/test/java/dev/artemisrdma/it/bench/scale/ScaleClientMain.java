package dev.artemisrdma.it.bench.scale;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;

/**
 * One client JVM of the scale benchmark: opens {@code count} JMS connections over RDMA, or over Netty TCP for a
 * {@code tcp://} URL (each its own connection, session, queue, producer and consumer), and sends and receives one 1 KiB message on each as it opens;
 * prints {@code CONNECTED n}. Then on stdin: {@code round M} sends M messages on every connection at once (from
 * several threads) and receives them, printing {@code ROUND sent=... received=...}; {@code close} closes every
 * connection and exits. Any failure prints {@code FAILED reason} and exits 1.
 *
 * <p>Arguments: url count name threads.
 */
public final class ScaleClientMain {

    private static final int SIZE = 1024;

    private record Conn(Connection connection, Session session, MessageProducer producer, MessageConsumer consumer) {
    }

    private ScaleClientMain() {
    }

    public static void main(String[] args) {
        try {
            run(args[0], Integer.parseInt(args[1]), args[2], Integer.parseInt(args[3]));
            System.exit(0);
        } catch (Throwable e) {
            System.out.println("FAILED " + e);
            e.printStackTrace(System.out);
            System.out.flush();
            System.exit(1);
        }
    }

    private static void run(String url, int count, String name, int threads) throws Exception {
        // tcp://: the Netty TCP baseline pass, through Artemis's own factory
        ActiveMQConnectionFactory cf = url.startsWith("tcp://") ? new ActiveMQConnectionFactory(url)
                : RdmaConnectionFactories.create(url);
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        List<Conn> conns = new ArrayList<>();
        List<Future<Conn>> opening = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            String queue = "scale." + name + "." + i;
            opening.add(pool.submit(() -> open(cf, queue)));
        }
        for (Future<Conn> f : opening) {
            conns.add(f.get());
        }
        System.out.println("CONNECTED " + conns.size());
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.startsWith("round ")) {
                round(conns, Integer.parseInt(line.substring(6).trim()), pool, threads);
            } else if (line.equals("close")) {
                break;
            }
        }
        List<Future<?>> closing = new ArrayList<>();
        for (Conn c : conns) {
            closing.add(pool.submit(() -> {
                c.connection.close();
                return null;
            }));
        }
        for (Future<?> f : closing) {
            f.get();
        }
        pool.shutdown();
        cf.close();
        System.out.println("CLOSED " + conns.size());
        System.out.flush();
    }

    private static Conn open(ActiveMQConnectionFactory cf, String queueName) throws Exception {
        Connection connection = cf.createConnection();
        try {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            jakarta.jms.Queue queue = session.createQueue(queueName);
            MessageConsumer consumer = session.createConsumer(queue);
            MessageProducer producer = session.createProducer(queue);
            producer.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
            connection.start();
            Conn c = new Conn(connection, session, producer, consumer);
            exchange(c, 1);
            return c;
        } catch (Exception e) {
            connection.close();
            throw e;
        }
    }

    /** Sends {@code messages} and receives them back on one connection. */
    private static void exchange(Conn c, int messages) throws Exception {
        byte[] body = new byte[SIZE];
        for (int i = 0; i < messages; i++) {
            BytesMessage m = c.session.createBytesMessage();
            m.writeBytes(body);
            c.producer.send(m);
        }
        for (int i = 0; i < messages; i++) {
            if (c.consumer.receive(60_000) == null) {
                throw new IllegalStateException("message " + i + " of " + messages + " not received on "
                        + c.connection);
            }
        }
    }

    /** Every connection sends and receives {@code messages}, all at once (spread over the threads). */
    private static void round(List<Conn> conns, int messages, ExecutorService pool, int threads) throws Exception {
        AtomicLong done = new AtomicLong();
        long start = System.nanoTime();
        List<Future<?>> work = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int first = t;
            work.add(pool.submit(() -> {
                byte[] body = new byte[SIZE];
                for (int i = first; i < conns.size(); i += threads) { // first all send: every connection busy
                    Conn c = conns.get(i);
                    for (int k = 0; k < messages; k++) {
                        BytesMessage m = c.session.createBytesMessage();
                        m.writeBytes(body);
                        c.producer.send(m);
                    }
                }
                for (int i = first; i < conns.size(); i += threads) {
                    Conn c = conns.get(i);
                    for (int k = 0; k < messages; k++) {
                        if (c.consumer.receive(60_000) == null) {
                            throw new IllegalStateException("round: message " + k + " not received on "
                                    + c.connection);
                        }
                    }
                    done.addAndGet(messages);
                }
                return null;
            }));
        }
        for (Future<?> f : work) {
            f.get();
        }
        System.out.printf("ROUND sent=%d received=%d ms=%d%n", done.get(), done.get(),
                (System.nanoTime() - start) / 1_000_000);
        System.out.flush();
    }
}
