package dev.artemisrdma.it.bench;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.it.artemis.LabBroker;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.ConnectionFactory;
import jakarta.jms.DeliveryMode;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import org.HdrHistogram.Histogram;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;

import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

/**
 * One broker with a Netty TCP acceptor and an RDMA acceptor on the same address; the same JMS workload over each in
 * one run: 1 KiB non-persistent messages, one producer, one consumer. Throughput all-out, then latency at a fixed
 * rate (send-to-receive time, HdrHistogram). Prints a side-by-side table with RDMA/TCP ratios.
 *
 * <p>Arguments: [messages for throughput] [rate msg/s] [seconds at that rate].
 */
public final class ArtemisTransportBenchmark {

    private static final int SIZE = 1024;

    record Figures(String transport, double messagesPerSecond, Histogram latency) {
    }

    private ArtemisTransportBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        // defaults sized for the Soft-RoCE lab (TCG, 2 vCPUs): 200 msg/s keeps both transports below saturation
        int messages = args.length > 0 ? Integer.parseInt(args[0]) : 20_000;
        int rate = args.length > 1 ? Integer.parseInt(args[1]) : 200;
        int seconds = args.length > 2 ? Integer.parseInt(args[2]) : 15;
        String host = System.getenv().getOrDefault("RDMA_LAB_ADDR0", "10.77.0.1");
        List<Figures> results = new ArrayList<>();
        try (LabBroker broker = LabBroker.start(host, 61700, Files.createTempDirectory("bench-broker"), false, 61616);
             ActiveMQConnectionFactory tcp = new ActiveMQConnectionFactory("tcp://" + host + ":61616");
             ActiveMQConnectionFactory rdma = RdmaConnectionFactories.create("rdma://" + host + ":61700")) {
            for (ActiveMQConnectionFactory cf : new ActiveMQConnectionFactory[] {tcp, rdma}) {
                throughput(cf, "warmup", messages / 5); // JIT and broker warm-up, not reported
            }
            for (int round = 0; round < 2; round++) { // alternate, so drift hits both alike
                for (String name : new String[] {"tcp", "rdma"}) {
                    ActiveMQConnectionFactory cf = name.equals("tcp") ? tcp : rdma;
                    double mps = throughput(cf, name + "-" + round, messages);
                    Histogram latency = fixedRate(cf, name + "-lat-" + round, rate, seconds);
                    results.add(new Figures(name, mps, latency));
                }
            }
        }
        print(results, messages, rate, seconds);
        System.exit(0);
    }

    /** All-out: the producer sends as fast as flow control lets it, the consumer drains; msgs/s end to end. */
    static double throughput(ConnectionFactory cf, String queueName, int count) throws Exception {
        try (Connection consumerConnection = cf.createConnection();
             Connection producerConnection = cf.createConnection()) {
            Session cs = consumerConnection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = cs.createQueue("bench." + queueName);
            MessageConsumer consumer = cs.createConsumer(queue);
            consumerConnection.start();
            Session ps = producerConnection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = ps.createProducer(queue);
            producer.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
            byte[] body = new byte[SIZE];
            AtomicReference<Exception> failure = new AtomicReference<>();
            long start = System.nanoTime();
            Thread drain = new Thread(() -> {
                try {
                    for (int i = 0; i < count; i++) {
                        if (consumer.receive(30_000) == null) {
                            throw new IllegalStateException("message " + i + " of " + count + " missing");
                        }
                    }
                } catch (Exception e) {
                    failure.set(e);
                }
            });
            drain.start();
            for (int i = 0; i < count; i++) {
                BytesMessage m = ps.createBytesMessage();
                m.writeBytes(body);
                producer.send(m);
            }
            drain.join();
            if (failure.get() != null) {
                throw failure.get();
            }
            return count / ((System.nanoTime() - start) / 1e9);
        }
    }

    /** Sends at a fixed rate; each message carries its send time; the consumer records send-to-receive time. */
    static Histogram fixedRate(ConnectionFactory cf, String queueName, int rate, int seconds) throws Exception {
        Histogram histogram = new Histogram(TimeUnit.SECONDS.toNanos(60), 3);
        int count = rate * seconds;
        try (Connection consumerConnection = cf.createConnection();
             Connection producerConnection = cf.createConnection()) {
            Session cs = consumerConnection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = cs.createQueue("bench." + queueName);
            MessageConsumer consumer = cs.createConsumer(queue);
            AtomicReference<Exception> failure = new AtomicReference<>();
            Thread drain = new Thread(() -> {
                try {
                    for (int i = 0; i < count; i++) {
                        BytesMessage m = (BytesMessage) consumer.receive(30_000);
                        if (m == null) {
                            throw new IllegalStateException("message " + i + " of " + count + " missing");
                        }
                        long now = System.nanoTime();
                        histogram.recordValue(Math.max(0, now - m.getLongProperty("sentAt")));
                    }
                } catch (Exception e) {
                    failure.set(e);
                }
            });
            consumerConnection.start();
            drain.start();
            Session ps = producerConnection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = ps.createProducer(queue);
            producer.setDeliveryMode(DeliveryMode.NON_PERSISTENT);
            byte[] body = new byte[SIZE];
            long interval = TimeUnit.SECONDS.toNanos(1) / rate;
            long next = System.nanoTime();
            for (int i = 0; i < count; i++) {
                while (System.nanoTime() < next) {
                    LockSupport.parkNanos(Math.min(50_000, next - System.nanoTime()));
                }
                BytesMessage m = ps.createBytesMessage();
                m.writeBytes(body);
                m.setLongProperty("sentAt", System.nanoTime());
                producer.send(m);
                next += interval;
            }
            drain.join();
            if (failure.get() != null) {
                throw failure.get();
            }
        }
        return histogram;
    }

    private static void print(List<Figures> results, int messages, int rate, int seconds) {
        Figures tcp = best(results, "tcp");
        Figures rdma = best(results, "rdma");
        System.out.println();
        System.out.printf(Locale.ROOT, "Artemis over Netty TCP vs RDMA: 1 KiB non-persistent JMS messages, one "
                + "producer, one consumer, one broker (best of 2 rounds)%n");
        System.out.printf(Locale.ROOT, "%-28s %14s %14s %10s%n", "", "Netty TCP", "RDMA", "RDMA/TCP");
        row("throughput, msg/s (" + messages + ")", tcp.messagesPerSecond, rdma.messagesPerSecond, "%14.0f");
        for (double p : new double[] {50, 90, 99, 99.9}) {
            row("latency p" + (p == (int) p ? Integer.toString((int) p) : Double.toString(p)) + ", us @" + rate
                    + "/s", tcp.latency.getValueAtPercentile(p) / 1000.0, rdma.latency.getValueAtPercentile(p)
                    / 1000.0, "%14.1f");
        }
        row("latency min, us", tcp.latency.getMinValue() / 1000.0, rdma.latency.getMinValue() / 1000.0, "%14.1f");
        System.out.println("(latency: send to receive, " + rate * seconds + " messages at " + rate + " msg/s)");
    }

    private static void row(String label, double tcp, double rdma, String format) {
        System.out.printf(Locale.ROOT, "%-28s " + format + " " + format + " %10.2f%n", label, tcp, rdma,
                tcp == 0 ? 0 : rdma / tcp);
    }

    /** The round with the higher throughput, and the latency histogram with the lower median. */
    private static Figures best(List<Figures> results, String transport) {
        Figures fastest = null;
        Histogram calmest = null;
        for (Figures f : results) {
            if (!f.transport.equals(transport)) {
                continue;
            }
            if (fastest == null || f.messagesPerSecond > fastest.messagesPerSecond) {
                fastest = f;
            }
            if (calmest == null || f.latency.getValueAtPercentile(50) < calmest.getValueAtPercentile(50)) {
                calmest = f.latency;
            }
        }
        return new Figures(transport, fastest.messagesPerSecond, calmest);
    }
}
