package dev.artemisrdma.it.bench;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.it.artemis.LabBroker;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import org.HdrHistogram.Histogram;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;

import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

/**
 * One broker with a Netty TCP acceptor and an RDMA acceptor on the same address; the same JMS workload over each in
 * one run, for every scenario: 1 KiB messages, non-persistent and persistent, with 1 and with 16 producer/consumer
 * pairs (one queue per pair). For each: throughput all-out for a fixed time, CPU per message (this process: broker
 * and clients), then latency at a fixed total rate (send-to-receive time, HdrHistogram) and the CPU that rate costs.
 * Prints a table per scenario with RDMA/TCP ratios and a summary; writes {@code artemis-summary.csv} and one
 * {@code .hgrm} percentile distribution per scenario and transport into the results folder ({@code
 * RDMA_LAB_RESULTS}), for {@link Charts}.
 *
 * <p>Knobs (environment): {@code DELIVERY} ("nonpersistent persistent"), {@code PAIRS} ("1 16"), {@code ROUNDS}
 * (2), {@code THROUGHPUT_SECONDS} (5), {@code RATE} (200 msg/s in all, split across the pairs), {@code
 * LATENCY_SECONDS} (10).
 */
public final class ArtemisTransportBenchmark {

    private static final int SIZE = 1024;
    private static final long RECEIVE_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(30);

    /** Delivery mode and number of producer/consumer pairs. */
    record Scenario(boolean persistent, int pairs) {
        String delivery() {
            return persistent ? "persistent" : "nonpersistent";
        }

        String label() {
            return (persistent ? "persistent" : "non-persistent") + ", " + pairs + (pairs == 1 ? " pair" : " pairs");
        }
    }

    record Settings(List<Boolean> deliveries, List<Integer> pairs, int rounds, double throughputSeconds, int rate,
                    double latencySeconds) {

        static Settings fromEnvironment() {
            List<Boolean> deliveries = new ArrayList<>();
            for (String d : words("DELIVERY", "nonpersistent persistent")) {
                if (!d.equals("nonpersistent") && !d.equals("persistent")) {
                    throw new IllegalArgumentException("DELIVERY takes nonpersistent and/or persistent, got '" + d
                            + "'");
                }
                deliveries.add(d.equals("persistent"));
            }
            List<Integer> pairs = new ArrayList<>();
            for (String p : words("PAIRS", "1 16")) {
                pairs.add(positive("PAIRS", p));
            }
            return new Settings(deliveries, pairs, positive("ROUNDS", env("ROUNDS", "2")),
                    Double.parseDouble(env("THROUGHPUT_SECONDS", "5")), positive("RATE", env("RATE", "200")),
                    Double.parseDouble(env("LATENCY_SECONDS", "10")));
        }

        private static String env(String name, String fallback) {
            String value = System.getenv(name);
            return value == null || value.isBlank() ? fallback : value.trim();
        }

        private static List<String> words(String name, String fallback) {
            return Arrays.asList(env(name, fallback).split("\\s+"));
        }

        private static int positive(String name, String value) {
            try {
                int n = Integer.parseInt(value);
                if (n > 0) {
                    return n;
                }
            } catch (NumberFormatException e) {
                // reported below
            }
            throw new IllegalArgumentException(name + " takes positive whole numbers, got '" + value + "'");
        }
    }

    /** One round of one scenario over one transport. */
    record Figures(String transport, Scenario scenario, double messagesPerSecond, double cpuMicrosPerMessage,
                   Histogram latency, double cpuPercentAtRate) {
    }

    private ArtemisTransportBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0) {
            System.err.println("artemis-bench takes no arguments: set DELIVERY, PAIRS, ROUNDS, THROUGHPUT_SECONDS, "
                    + "RATE, LATENCY_SECONDS in the environment (see README, Benchmarks)");
            System.exit(2);
        }
        Settings settings;
        try {
            settings = Settings.fromEnvironment();
        } catch (IllegalArgumentException e) {
            System.err.println("artemis-bench: " + e.getMessage());
            System.exit(2);
            return;
        }
        String host = System.getenv().getOrDefault("RDMA_LAB_ADDR0", "10.77.0.1");
        Path out = Path.of(System.getenv().getOrDefault("RDMA_LAB_RESULTS", "."));
        List<Figures> results = new ArrayList<>();
        // persistence on: durable messages go through the journal; non-persistent ones never touch it
        try (LabBroker broker = LabBroker.start(host, 61700, Files.createTempDirectory("bench-broker"), true, 61616);
             ActiveMQConnectionFactory tcp = new ActiveMQConnectionFactory("tcp://" + host + ":61616");
             ActiveMQConnectionFactory rdma = RdmaConnectionFactories.create("rdma://" + host + ":61700")) {
            for (ActiveMQConnectionFactory cf : new ActiveMQConnectionFactory[] {tcp, rdma}) {
                // JIT and broker warm-up, not reported
                throughput(cf, "warmup", new Scenario(false, 1), Math.min(3, settings.throughputSeconds));
            }
            for (boolean persistent : settings.deliveries) {
                for (int pairs : settings.pairs) {
                    Scenario scenario = new Scenario(persistent, pairs);
                    for (int round = 0; round < settings.rounds; round++) { // alternate, so drift hits both alike
                        for (String name : new String[] {"tcp", "rdma"}) {
                            ActiveMQConnectionFactory cf = name.equals("tcp") ? tcp : rdma;
                            String queue = scenario.delivery() + pairs + "." + name + round;
                            double[] throughput = throughput(cf, queue, scenario, settings.throughputSeconds);
                            double[] latency = new double[1];
                            Histogram histogram = fixedRate(cf, queue + ".lat", scenario, settings.rate,
                                    settings.latencySeconds, latency);
                            results.add(new Figures(name, scenario, throughput[0], throughput[1], histogram,
                                    latency[0]));
                            System.out.printf(Locale.ROOT, "%s %s round %d: %.0f msg/s, %.1f us CPU/msg, p50 %.0f us%n",
                                    scenario.label(), name, round, throughput[0], throughput[1],
                                    histogram.getValueAtPercentile(50) / 1000.0);
                        }
                    }
                }
            }
        }
        List<Figures[]> best = new ArrayList<>();
        for (boolean persistent : settings.deliveries) {
            for (int pairs : settings.pairs) {
                Scenario scenario = new Scenario(persistent, pairs);
                Figures[] pair = {best(results, scenario, "tcp"), best(results, scenario, "rdma")};
                print(pair[0], pair[1], settings);
                best.add(pair);
            }
        }
        printSummary(best, settings);
        write(out, best, settings);
        System.exit(0);
    }

    // ---------------------------------------------------------------- workloads

    /** Sessions of one producer/consumer pair on its own queue, each pair on two connections of its own. */
    private record Pair(Connection producerConnection, Connection consumerConnection, Session producerSession,
                        MessageProducer producer, MessageConsumer consumer) implements AutoCloseable {

        static Pair open(ActiveMQConnectionFactory cf, String queueName, boolean persistent) throws Exception {
            Connection consumerConnection = cf.createConnection();
            Connection producerConnection = null;
            try {
                Session cs = consumerConnection.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageConsumer consumer = cs.createConsumer(cs.createQueue("bench." + queueName));
                consumerConnection.start();
                producerConnection = cf.createConnection();
                Session ps = producerConnection.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageProducer producer = ps.createProducer(ps.createQueue("bench." + queueName));
                producer.setDeliveryMode(persistent ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT);
                return new Pair(producerConnection, consumerConnection, ps, producer, consumer);
            } catch (Exception e) {
                consumerConnection.close();
                if (producerConnection != null) {
                    producerConnection.close();
                }
                throw e;
            }
        }

        static List<Pair> open(ActiveMQConnectionFactory cf, String queueName, Scenario scenario) throws Exception {
            List<Pair> pairs = new ArrayList<>();
            try {
                for (int i = 0; i < scenario.pairs(); i++) {
                    pairs.add(open(cf, queueName + "." + i, scenario.persistent()));
                }
            } catch (Exception e) {
                closeAll(pairs);
                throw e;
            }
            return pairs;
        }

        static void closeAll(List<Pair> pairs) throws Exception {
            Exception first = null;
            for (Pair pair : pairs) {
                try {
                    pair.close();
                } catch (Exception e) {
                    first = first == null ? e : first;
                }
            }
            if (first != null) {
                throw first;
            }
        }

        BytesMessage message(byte[] body) throws Exception {
            BytesMessage m = producerSession.createBytesMessage();
            m.writeBytes(body);
            return m;
        }

        @Override
        public void close() throws Exception {
            try {
                producerConnection.close();
            } finally {
                consumerConnection.close();
            }
        }
    }

    /**
     * All-out for {@code seconds}: each producer sends as fast as flow control (and, persistent, the broker's
     * confirmation) lets it; each consumer drains everything its producer sent. Returns {msgs/s end to end, CPU
     * microseconds of this process per message}.
     */
    static double[] throughput(ActiveMQConnectionFactory cf, String queueName, Scenario scenario, double seconds)
            throws Exception {
        List<Pair> pairs = Pair.open(cf, queueName, scenario);
        try {
            int n = pairs.size();
            long[] sent = new long[n];
            long[] received = new long[n];
            long[] lastReceived = new long[n];
            boolean[] sendingDone = new boolean[n];
            AtomicReference<Exception> failure = new AtomicReference<>();
            List<Thread> threads = new ArrayList<>();
            byte[] body = new byte[SIZE];
            long cpuStart = processCpuNanos();
            long start = System.nanoTime();
            long deadline = start + (long) (seconds * 1e9);
            for (int i = 0; i < n; i++) {
                int p = i;
                Pair pair = pairs.get(p);
                threads.add(new Thread(() -> {
                    try {
                        long count = 0;
                        while (System.nanoTime() < deadline && failure.get() == null) {
                            pair.producer.send(pair.message(body));
                            count++;
                        }
                        synchronized (sent) {
                            sent[p] = count;
                            sendingDone[p] = true;
                        }
                    } catch (Exception e) {
                        failure.compareAndSet(null, e);
                    }
                }, "bench-producer-" + p));
                threads.add(new Thread(() -> {
                    try {
                        long count = 0;
                        long lastArrival = System.nanoTime();
                        while (failure.get() == null) {
                            synchronized (sent) {
                                if (sendingDone[p] && count == sent[p]) {
                                    break;
                                }
                            }
                            Message m = pair.consumer.receive(100);
                            long now = System.nanoTime();
                            if (m != null) {
                                count++;
                                lastArrival = now;
                            } else if (now - lastArrival > RECEIVE_TIMEOUT_NANOS) {
                                throw new IllegalStateException(queueName + " pair " + p + ": nothing arrived for "
                                        + "30 s after " + count + " messages");
                            }
                        }
                        received[p] = count;
                        lastReceived[p] = lastArrival;
                    } catch (Exception e) {
                        failure.compareAndSet(null, e);
                    }
                }, "bench-consumer-" + p));
            }
            threads.forEach(Thread::start);
            for (Thread t : threads) {
                t.join();
            }
            long cpu = processCpuNanos() - cpuStart;
            if (failure.get() != null) {
                throw failure.get();
            }
            long total = Arrays.stream(received).sum();
            long end = Arrays.stream(lastReceived).max().orElse(start);
            return new double[] {total / ((end - start) / 1e9), cpu / 1000.0 / total};
        } finally {
            Pair.closeAll(pairs);
        }
    }

    /**
     * Sends at a fixed total rate, split evenly across the pairs (their ticks staggered); each message carries its
     * send time; the consumers record send-to-receive time into one histogram. {@code cpuPercent[0]} receives the
     * CPU this process used meanwhile, in percent of one core.
     */
    static Histogram fixedRate(ActiveMQConnectionFactory cf, String queueName, Scenario scenario, int rate,
                               double seconds, double[] cpuPercent) throws Exception {
        Histogram all = new Histogram(TimeUnit.SECONDS.toNanos(60), 3);
        List<Pair> pairs = Pair.open(cf, queueName, scenario);
        try {
            int n = pairs.size();
            long perPair = Math.max(1, Math.round(rate * seconds / n));
            long interval = (long) (1e9 * n / rate);
            AtomicReference<Exception> failure = new AtomicReference<>();
            List<Thread> threads = new ArrayList<>();
            byte[] body = new byte[SIZE];
            long cpuStart = processCpuNanos();
            long start = System.nanoTime();
            for (int i = 0; i < n; i++) {
                int p = i;
                Pair pair = pairs.get(p);
                threads.add(new Thread(() -> {
                    try {
                        Histogram mine = new Histogram(TimeUnit.SECONDS.toNanos(60), 3);
                        for (long k = 0; k < perPair; k++) {
                            Message m = pair.consumer.receive(30_000);
                            if (m == null) {
                                throw new IllegalStateException(queueName + " pair " + p + ": message " + k + " of "
                                        + perPair + " missing");
                            }
                            mine.recordValue(Math.max(0, System.nanoTime() - m.getLongProperty("sentAt")));
                        }
                        synchronized (all) {
                            all.add(mine);
                        }
                    } catch (Exception e) {
                        failure.compareAndSet(null, e);
                    }
                }, "bench-lat-consumer-" + p));
                threads.add(new Thread(() -> {
                    try {
                        long next = start + interval * p / n;
                        for (long k = 0; k < perPair && failure.get() == null; k++) {
                            // one sleep per message: waking every few microseconds would cost more CPU (under
                            // emulation) than the transports measured; sentAt is read at the send, so a late wake-up
                            // never counts as latency
                            for (long wait = next - System.nanoTime(); wait > 0; wait = next - System.nanoTime()) {
                                LockSupport.parkNanos(wait);
                            }
                            BytesMessage m = pair.message(body);
                            m.setLongProperty("sentAt", System.nanoTime());
                            pair.producer.send(m);
                            next += interval;
                        }
                    } catch (Exception e) {
                        failure.compareAndSet(null, e);
                    }
                }, "bench-lat-producer-" + p));
            }
            threads.forEach(Thread::start);
            for (Thread t : threads) {
                t.join();
            }
            long elapsed = System.nanoTime() - start;
            cpuPercent[0] = 100.0 * (processCpuNanos() - cpuStart) / elapsed;
            if (failure.get() != null) {
                throw failure.get();
            }
            return all;
        } finally {
            Pair.closeAll(pairs);
        }
    }

    /** CPU time of this whole process (broker, clients, completion loops, Netty), all threads. */
    static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    // ---------------------------------------------------------------- reporting

    private static final double[] PERCENTILES = {50, 90, 99, 99.9};

    private static String percentileName(double p) {
        return "p" + (p == (int) p ? Integer.toString((int) p) : Double.toString(p));
    }

    private static void print(Figures tcp, Figures rdma, Settings settings) {
        System.out.println();
        System.out.printf(Locale.ROOT, "Artemis over Netty TCP vs RDMA: 1 KiB JMS messages, %s, one broker (best "
                + "of %d rounds)%n", tcp.scenario.label(), settings.rounds);
        System.out.printf(Locale.ROOT, "%-30s %14s %14s %10s%n", "", "Netty TCP", "RDMA", "RDMA/TCP");
        row("throughput, msg/s", tcp.messagesPerSecond, rdma.messagesPerSecond, "%14.0f");
        row("CPU per message, us", tcp.cpuMicrosPerMessage, rdma.cpuMicrosPerMessage, "%14.1f");
        for (double p : PERCENTILES) {
            row("latency " + percentileName(p) + ", us @" + settings.rate + "/s",
                    tcp.latency.getValueAtPercentile(p) / 1000.0, rdma.latency.getValueAtPercentile(p) / 1000.0,
                    "%14.1f");
        }
        row("latency max, us", tcp.latency.getMaxValue() / 1000.0, rdma.latency.getMaxValue() / 1000.0, "%14.1f");
        row("CPU @" + settings.rate + "/s, % of a core", tcp.cpuPercentAtRate, rdma.cpuPercentAtRate, "%14.1f");
        System.out.println("(throughput: " + settings.throughputSeconds + " s all-out; latency: send to receive, "
                + tcp.latency.getTotalCount() + " messages at " + settings.rate + " msg/s in all; CPU: the whole "
                + "process, broker and clients)");
    }

    private static void row(String label, double tcp, double rdma, String format) {
        System.out.printf(Locale.ROOT, "%-30s " + format + " " + format + " %10.2f%n", label, tcp, rdma,
                tcp == 0 ? 0 : rdma / tcp);
    }

    /** One line per scenario, RDMA/TCP ratios only: the figures the issue asks for at a glance. */
    private static void printSummary(List<Figures[]> best, Settings settings) {
        System.out.println();
        System.out.println("RDMA/TCP ratios (throughput: higher is better; latency and CPU: lower is better)");
        System.out.printf(Locale.ROOT, "%-28s %10s %8s %8s %8s %12s%n", "scenario", "throughput", "p50", "p99",
                "p99.9", "CPU per msg");
        for (Figures[] f : best) {
            Histogram t = f[0].latency;
            Histogram r = f[1].latency;
            System.out.printf(Locale.ROOT, "%-28s %10.2f %8.2f %8.2f %8.2f %12.2f%n", f[0].scenario.label(),
                    f[1].messagesPerSecond / f[0].messagesPerSecond,
                    ratio(r.getValueAtPercentile(50), t.getValueAtPercentile(50)),
                    ratio(r.getValueAtPercentile(99), t.getValueAtPercentile(99)),
                    ratio(r.getValueAtPercentile(99.9), t.getValueAtPercentile(99.9)),
                    f[1].cpuMicrosPerMessage / f[0].cpuMicrosPerMessage);
        }
    }

    private static double ratio(double a, double b) {
        return b == 0 ? 0 : a / b;
    }

    /** artemis-summary.csv (one row per scenario and transport) and one .hgrm distribution each, for Charts. */
    private static void write(Path out, List<Figures[]> best, Settings settings) throws IOException {
        Files.createDirectories(out);
        // the charts' titles carry this day, also when they are drawn again later from a copy of the folder
        Files.writeString(out.resolve(Charts.MEASURED_ON), LocalDate.now(ZoneOffset.UTC) + "\n");
        try (PrintWriter csv = new PrintWriter(Files.newBufferedWriter(out.resolve("artemis-summary.csv")))) {
            csv.println("delivery,pairs,transport,msgs_per_s,cpu_us_per_msg,p50_us,p90_us,p99_us,p999_us,max_us,"
                    + "rate,cpu_pct_at_rate");
            for (Figures[] pair : best) {
                for (Figures f : pair) {
                    Histogram h = f.latency;
                    csv.printf(Locale.ROOT, "%s,%d,%s,%.0f,%.2f,%.1f,%.1f,%.1f,%.1f,%.1f,%d,%.1f%n",
                            f.scenario.delivery(), f.scenario.pairs(), f.transport, f.messagesPerSecond,
                            f.cpuMicrosPerMessage, h.getValueAtPercentile(50) / 1000.0,
                            h.getValueAtPercentile(90) / 1000.0, h.getValueAtPercentile(99) / 1000.0,
                            h.getValueAtPercentile(99.9) / 1000.0, h.getMaxValue() / 1000.0, settings.rate,
                            f.cpuPercentAtRate);
                    Path hgrm = out.resolve(String.format(Locale.ROOT, "artemis-latency-%s-%d-%s.hgrm",
                            f.scenario.delivery(), f.scenario.pairs(), f.transport));
                    try (PrintStream ps = new PrintStream(Files.newOutputStream(hgrm), false, "UTF-8")) {
                        h.outputPercentileDistribution(ps, 1000.0); // microseconds
                    }
                }
            }
        }
        System.out.println("artemis-bench: summary and latency distributions in " + out.toAbsolutePath());
    }

    /** The round with the higher throughput (with its CPU per message), and the latency with the lower median. */
    private static Figures best(List<Figures> results, Scenario scenario, String transport) {
        Figures fastest = null;
        Figures calmest = null;
        for (Figures f : results) {
            if (!f.transport.equals(transport) || !f.scenario.equals(scenario)) {
                continue;
            }
            if (fastest == null || f.messagesPerSecond > fastest.messagesPerSecond) {
                fastest = f;
            }
            if (calmest == null || f.latency.getValueAtPercentile(50) < calmest.latency.getValueAtPercentile(50)) {
                calmest = f;
            }
        }
        return new Figures(transport, scenario, fastest.messagesPerSecond, fastest.cpuMicrosPerMessage,
                calmest.latency, calmest.cpuPercentAtRate);
    }
}
