package dev.artemisrdma.it.bench;

import static dev.artemisrdma.it.bench.BenchEnv.env;
import static dev.artemisrdma.it.bench.BenchEnv.positive;
import static dev.artemisrdma.it.bench.BenchEnv.words;

import dev.artemisrdma.artemis.RdmaClientMetrics;
import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.artemis.RdmaTransportMetricsMXBean;
import dev.artemisrdma.it.JavaProcess;
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
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.ToDoubleFunction;

/**
 * One broker with a Netty TCP acceptor and an RDMA acceptor on the same address; the same JMS workload over each in
 * one run, for every scenario: 1 KiB messages, non-persistent and persistent, with 1 and with 16 producer/consumer
 * pairs (one queue per pair). For each: throughput all-out for a fixed time, CPU per message (this process: broker
 * and clients), then latency at a fixed total rate (send-to-receive time, HdrHistogram) and the CPU that rate costs.
 * Prints a table per scenario with RDMA/TCP ratios and a summary; writes {@code artemis-summary.csv} and one
 * {@code .hgrm} percentile distribution per scenario and transport into the results folder ({@code
 * RDMA_LAB_RESULTS}), for {@link Charts}.
 *
 * <p>Rounds alternate TCP and RDMA, so drift within the boot hits both alike; every figure reported is the median of
 * the rounds with their range, and the RDMA/TCP ratios are also taken round by round (each RDMA round against the
 * TCP round just before it). Per scenario and transport it also prints which threads used the CPU (thread CPU time
 * by thread name), and it writes {@code artemis-phases.csv} (when each phase ran, epoch milliseconds) so a flight
 * recording of the run can be split by transport.
 *
 * <p>Knobs (environment): {@code DELIVERY} ("nonpersistent persistent"), {@code PAIRS} ("1 16"), {@code ROUNDS}
 * (3), {@code THROUGHPUT_SECONDS} (5), {@code RATE} (50 msg/s in all, split across the pairs: low enough that the
 * lab's 2 vCPUs are not saturated, so latency measures the transports rather than queueing), {@code
 * LATENCY_SECONDS} (10).
 */
public final class ArtemisTransportBenchmark {

    private static final int SIZE = 1024;
    private static final long RECEIVE_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(30);

    /** Delivery mode and number of producer/consumer pairs. */
    record Scenario(boolean persistent, int pairs) {
        /** Every delivery with every pair count, deliveries outermost: the order the benchmarks run them in. */
        static List<Scenario> every(List<Boolean> deliveries, List<Integer> pairs) {
            List<Scenario> all = new ArrayList<>();
            for (boolean persistent : deliveries) {
                for (int p : pairs) {
                    all.add(new Scenario(persistent, p));
                }
            }
            return all;
        }

        String delivery() {
            return persistent ? "persistent" : "nonpersistent";
        }

        String label() {
            return (persistent ? "persistent" : "non-persistent") + ", " + pairs + (pairs == 1 ? " pair" : " pairs");
        }
    }

    record Settings(List<Boolean> deliveries, List<Integer> pairs, int rounds, double throughputSeconds, int rate,
                    double latencySeconds, boolean brokerJvm, List<String> brokerJvmOptions, int warmupSeconds) {

        List<Scenario> scenarios() {
            return Scenario.every(deliveries, pairs);
        }

        static Settings fromEnvironment() {
            List<Boolean> deliveries = BenchEnv.deliveries(); // the record's accessor shadows a static import
            List<Integer> pairs = BenchEnv.pairs();
            return new Settings(deliveries, pairs, positive("ROUNDS", env("ROUNDS", "3")),
                    Double.parseDouble(env("THROUGHPUT_SECONDS", "5")), positive("RATE", env("RATE", "50")),
                    Double.parseDouble(env("LATENCY_SECONDS", "10")), brokerJvm(env("JVMS", "2")),
                    words("BROKER_JVM_OPTS", "-Xmx2g"), positive("WARMUP_SECONDS", env("WARMUP_SECONDS", "150")));
        }

        private static boolean brokerJvm(String jvms) {
            if (!jvms.equals("1") && !jvms.equals("2")) {
                throw new IllegalArgumentException("JVMS takes 2 (broker and clients in JVMs of their own) or 1 (all "
                        + "in one), got '" + jvms + "'");
            }
            return jvms.equals("2");
        }

    }

    /** One round of one scenario over one transport. */
    record Figures(String transport, Scenario scenario, int round, double messagesPerSecond,
                   double cpuMicrosPerMessage, Histogram latency, double cpuPercentAtRate, ThreadCpu.Usage threads,
                   long messages, ClientCounters counters) {

        double percentileMicros(double p) {
            return latency.getValueAtPercentile(p) / 1000.0;
        }
    }

    /** When one phase of one round ran (wall clock), to split a flight recording of the run by transport. */
    record Phase(String transport, Scenario scenario, int round, String name, long startMillis, long endMillis) {
    }

    private static final List<Phase> PHASES = new ArrayList<>();

    private ArtemisTransportBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0) {
            System.err.println("artemis-bench takes no arguments: set DELIVERY, PAIRS, ROUNDS, THROUGHPUT_SECONDS, "
                    + "RATE, LATENCY_SECONDS in the environment (see it-tests/bench/README.md)");
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
        JavaProcess brokerJvm = null;
        LabBroker inProcess = null;
        if (settings.brokerJvm) {
            brokerJvm = JavaProcess.driven("artemis-bench-broker", BenchBrokerMain.class).jvm(settings.brokerJvmOptions)
                    .start(host, "61700", "61616", System.getenv().getOrDefault("ACCEPTOR_PARAMS", ""));
            brokerJvm.await("READY", 300);
        } else {
            inProcess = LabBroker.start(host, 61700, Files.createTempDirectory("bench-broker"), true, 61616);
        }
        CpuMeter meter = new CpuMeter(brokerJvm);
        System.out.println("artemis-bench: " + (settings.brokerJvm ? "broker and clients in JVMs of their own"
                : "broker and clients in one JVM (sharing one RDMA transport)") + ", " + settings.rounds + " rounds, "
                + settings.throughputSeconds + " s all-out, " + settings.rate + " msg/s for " + settings.latencySeconds
                + " s");
        try (AutoCloseable broker = settings.brokerJvm ? brokerJvm : inProcess;
             ActiveMQConnectionFactory tcp = new ActiveMQConnectionFactory("tcp://" + host + ":61616");
             ActiveMQConnectionFactory rdma = RdmaConnectionFactories.create("rdma://" + host + ":61700");
             // one idle connection each for the whole run, as a long-lived client holds: the RDMA client's transport
             // (its completion loop, registered send and receive memory) then lives across phases instead of being
             // built again for each, as Netty's client event loops (JVM-wide) do anyway
             Connection tcpKeeper = tcp.createConnection();
             Connection rdmaKeeper = rdma.createConnection()) {
            warmUp(tcp, rdma, settings, meter);
            for (boolean persistent : settings.deliveries) {
                for (int pairs : settings.pairs) {
                    Scenario scenario = new Scenario(persistent, pairs);
                    for (int round = 0; round < settings.rounds; round++) { // alternate, so drift hits both alike
                        for (String name : new String[] {"tcp", "rdma"}) {
                            ActiveMQConnectionFactory cf = name.equals("tcp") ? tcp : rdma;
                            String queue = scenario.delivery() + pairs + "." + name + round;
                            long t0 = System.currentTimeMillis();
                            ClientCounters before = ClientCounters.read(host);
                            AllOut throughput = throughput(cf, queue, scenario, settings.throughputSeconds, meter);
                            ClientCounters counters = ClientCounters.read(host).minus(before);
                            long t1 = System.currentTimeMillis();
                            double[] latency = new double[1];
                            Histogram histogram = fixedRate(cf, queue + ".lat", scenario, settings.rate,
                                    settings.latencySeconds, latency, meter);
                            long t2 = System.currentTimeMillis();
                            PHASES.add(new Phase(name, scenario, round, "throughput", t0, t1));
                            PHASES.add(new Phase(name, scenario, round, "latency", t1, t2));
                            results.add(new Figures(name, scenario, round, throughput.messagesPerSecond,
                                    throughput.cpuMicrosPerMessage, histogram, latency[0], throughput.threads,
                                    throughput.messages, counters));
                            System.out.printf(Locale.ROOT, "%s %s round %d: %.0f msg/s, %.1f us CPU/msg, JIT %d ms; "
                                    + "@%d/s p50 %.0f us, p99 %.0f us, p99.9 %.0f us, CPU %.0f %% of a core%n",
                                    scenario.label(), name, round, throughput.messagesPerSecond,
                                    throughput.cpuMicrosPerMessage, throughput.threads.jitMillis(), settings.rate,
                                    histogram.getValueAtPercentile(50) / 1000.0,
                                    histogram.getValueAtPercentile(99) / 1000.0,
                                    histogram.getValueAtPercentile(99.9) / 1000.0, latency[0]);
                        }
                    }
                }
            }
        }
        List<Comparison> comparisons = new ArrayList<>();
        for (boolean persistent : settings.deliveries) {
            for (int pairs : settings.pairs) {
                Comparison c = Comparison.of(results, new Scenario(persistent, pairs));
                print(c, settings);
                comparisons.add(c);
            }
        }
        printSummary(comparisons, settings);
        write(out, comparisons, settings);
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
    static AllOut throughput(ActiveMQConnectionFactory cf, String queueName, Scenario scenario, double seconds,
                             CpuMeter meter) throws Exception {
        return throughput(cf, queueName, scenario, seconds, meter, SIZE);
    }

    /** As above, with messages of {@code size} bytes. */
    static AllOut throughput(ActiveMQConnectionFactory cf, String queueName, Scenario scenario, double seconds,
                             CpuMeter meter, int size) throws Exception {
        List<Pair> pairs = Pair.open(cf, queueName, scenario);
        try {
            int n = pairs.size();
            long[] sent = new long[n];
            long[] received = new long[n];
            long[] lastReceived = new long[n];
            boolean[] sendingDone = new boolean[n];
            AtomicReference<Exception> failure = new AtomicReference<>();
            List<Thread> threads = new ArrayList<>();
            byte[] body = new byte[size];
            meter.mark();
            long markedAt = System.currentTimeMillis();
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
                    } finally {
                        ThreadCpu.recordEndingThread();
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
                    } finally {
                        ThreadCpu.recordEndingThread();
                    }
                }, "bench-consumer-" + p));
            }
            threads.forEach(Thread::start);
            for (Thread t : threads) {
                t.join();
            }
            ThreadCpu.Usage usage = meter.usage();
            long measuredUntil = System.currentTimeMillis();
            if (failure.get() != null) {
                throw failure.get();
            }
            long total = Arrays.stream(received).sum();
            long end = Arrays.stream(lastReceived).max().orElse(start);
            return new AllOut(total / ((end - start) / 1e9), usage.processNanos() / 1000.0 / total, usage, total,
                    markedAt, measuredUntil);
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
                               double seconds, double[] cpuPercent, CpuMeter meter) throws Exception {
        return fixedRate(cf, queueName, scenario, rate, seconds, cpuPercent, meter, SIZE);
    }

    /** As above, with messages of {@code size} bytes. */
    static Histogram fixedRate(ActiveMQConnectionFactory cf, String queueName, Scenario scenario, int rate,
                               double seconds, double[] cpuPercent, CpuMeter meter, int size) throws Exception {
        Histogram all = new Histogram(TimeUnit.SECONDS.toNanos(60), 3);
        List<Pair> pairs = Pair.open(cf, queueName, scenario);
        try {
            int n = pairs.size();
            long perPair = Math.max(1, Math.round(rate * seconds / n));
            long interval = (long) (1e9 * n / rate);
            AtomicReference<Exception> failure = new AtomicReference<>();
            List<Thread> threads = new ArrayList<>();
            byte[] body = new byte[size];
            meter.mark();
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
            cpuPercent[0] = 100.0 * meter.usage().processNanos() / elapsed;
            if (failure.get() != null) {
                throw failure.get();
            }
            return all;
        } finally {
            Pair.closeAll(pairs);
        }
    }

    /** What one all-out phase achieved, and the CPU it cost (all the benchmark's processes), by thread. */
    /** ... and when its CPU was measured (wall clock, from the mark to the reading: set-up and close left out). */
    record AllOut(double messagesPerSecond, double cpuMicrosPerMessage, ThreadCpu.Usage threads, long messages,
                  long startMillis, long endMillis) {
    }

    /**
     * Until the JIT has settled: under the lab's emulation both JVMs compile for minutes, and compiling took a core
     * or more through every phase of the first runs (rounds of one run differed by up to 4x). All-out phases of every
     * scenario, TCP and RDMA alternating, until a TCP/RDMA pair of them spent at most {@value #SETTLED_JIT_SHARE} of
     * its time compiling (both JVMs' compilers together), after every scenario ran once; {@code WARMUP_SECONDS} at
     * most.
     */
    private static void warmUp(ActiveMQConnectionFactory tcp, ActiveMQConnectionFactory rdma, Settings settings,
                               CpuMeter meter) throws Exception {
        List<Scenario> scenarios = settings.scenarios();
        long start = System.nanoTime();
        long deadline = start + TimeUnit.SECONDS.toNanos(settings.warmupSeconds);
        for (int i = 0; ; i++) {
            Scenario scenario = scenarios.get(i % scenarios.size());
            long jitMillis = 0;
            long pairStart = System.nanoTime();
            StringBuilder rates = new StringBuilder();
            for (ActiveMQConnectionFactory cf : new ActiveMQConnectionFactory[] {tcp, rdma}) {
                AllOut a = throughput(cf, "warmup" + i + (cf == tcp ? "tcp" : "rdma"), scenario, WARMUP_PHASE_SECONDS,
                        meter);
                jitMillis += a.threads.jitMillis();
                rates.append(rates.length() == 0 ? "" : " / ").append(Math.round(a.messagesPerSecond));
            }
            double share = jitMillis / (TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - pairStart) + 1.0);
            System.out.printf(Locale.ROOT, "warm-up %d (%s): TCP / RDMA %s msg/s, JIT compiling %.0f %% of the time%n",
                    i, scenario.label(), rates, 100 * share);
            if (i + 1 >= scenarios.size() && share <= SETTLED_JIT_SHARE) {
                System.out.printf(Locale.ROOT, "warm-up: the JIT settled after %.0f s%n",
                        (System.nanoTime() - start) / 1e9);
                return;
            }
            if (System.nanoTime() > deadline) {
                System.out.printf(Locale.ROOT, "warm-up: WARMUP_SECONDS (%d) passed before the JIT settled; measuring "
                        + "anyway (see JIT per round)%n", settings.warmupSeconds);
                return;
            }
        }
    }

    private static final double WARMUP_PHASE_SECONDS = 4;
    private static final double SETTLED_JIT_SHARE = 0.15;

    /** The RDMA client transport's counters ({@link RdmaClientMetrics}), to say what one phase made it do. */
    record ClientCounters(long framesSent, long framesReceived, long completions, long creditStalls, long wakeUps,
                          long blocks, long spins, long spinHits, long loopCpuNanos) {

        static ClientCounters read(String host) {
            RdmaTransportMetricsMXBean m = RdmaClientMetrics.counters(host + ":61700");
            if (m == null) {
                return new ClientCounters(0, 0, 0, 0, 0, 0, 0, 0, 0);
            }
            try {
                return new ClientCounters(m.getFramesSent(), m.getFramesReceived(), m.getCompletions(),
                        m.getCreditStalls(), m.getLoopWakeUps(), m.getLoopBlocks(), m.getLoopSpins(),
                        m.getLoopSpinHits(), m.getLoopCpuNanos());
            } catch (NoSuchMethodError olderConnector) {
                // a connector from before the loop statistics (artemis-ab measures older builds with this driver):
                // its frame counters only, and the loop's are said to be missing rather than read as zeros
                loopStatisticsMissing = true;
                return new ClientCounters(m.getFramesSent(), m.getFramesReceived(), m.getCompletions(),
                        m.getCreditStalls(), 0, 0, 0, 0, 0);
            }
        }

        /** Whether the connector measured predates the loop statistics (its loop figures print as missing). */
        static volatile boolean loopStatisticsMissing;

        ClientCounters minus(ClientCounters o) {
            return new ClientCounters(framesSent - o.framesSent, framesReceived - o.framesReceived,
                    completions - o.completions, creditStalls - o.creditStalls, wakeUps - o.wakeUps,
                    blocks - o.blocks, spins - o.spins, spinHits - o.spinHits, loopCpuNanos - o.loopCpuNanos);
        }

        static ClientCounters sum(List<ClientCounters> all) {
            ClientCounters s = new ClientCounters(0, 0, 0, 0, 0, 0, 0, 0, 0);
            for (ClientCounters c : all) {
                s = new ClientCounters(s.framesSent + c.framesSent, s.framesReceived + c.framesReceived,
                        s.completions + c.completions, s.creditStalls + c.creditStalls, s.wakeUps + c.wakeUps,
                        s.blocks + c.blocks, s.spins + c.spins, s.spinHits + c.spinHits,
                        s.loopCpuNanos + c.loopCpuNanos);
            }
            return s;
        }
    }

    /**
     * The CPU the benchmark's processes use between a mark and now: this JVM's threads and, when the broker has a JVM
     * of its own, the broker's (asked over its stdin); thread groups then read "client: ..." and "broker: ...".
     */
    static final class CpuMeter {
        private final JavaProcess broker;
        private ThreadCpu.Snapshot mark;

        CpuMeter(JavaProcess broker) {
            this.broker = broker;
        }

        void mark() throws Exception {
            if (broker != null) {
                broker.send("mark");
                broker.await("MARKED", 60);
            }
            mark = ThreadCpu.snapshot();
        }

        ThreadCpu.Usage usage() throws Exception {
            ThreadCpu.Usage local = ThreadCpu.snapshot().since(mark);
            if (broker == null) {
                return local;
            }
            broker.send("usage");
            ThreadCpu.Usage remote = BenchBrokerMain.parse(broker.await("USAGE", 60), "broker: ");
            return ThreadCpu.Usage.sum(List.of(local.prefixed("client: "), remote));
        }
    }

    // ---------------------------------------------------------------- reporting

    /** The rounds of one scenario over both transports: medians with their ranges, and round-by-round ratios. */
    record Comparison(Scenario scenario, List<Figures> tcp, List<Figures> rdma) {

        static Comparison of(List<Figures> results, Scenario scenario) {
            List<Figures> tcp = new ArrayList<>();
            List<Figures> rdma = new ArrayList<>();
            for (Figures f : results) {
                if (f.scenario.equals(scenario)) {
                    (f.transport.equals("tcp") ? tcp : rdma).add(f);
                }
            }
            return new Comparison(scenario, tcp, rdma);
        }

        List<Figures> rounds(String transport) {
            return transport.equals("tcp") ? tcp : rdma;
        }

        double[] values(String transport, ToDoubleFunction<Figures> figure) {
            return rounds(transport).stream().mapToDouble(figure).toArray();
        }

        /** RDMA's figure of each round over TCP's of the same round (TCP ran just before it). */
        double[] roundRatios(ToDoubleFunction<Figures> figure) {
            int n = Math.min(tcp.size(), rdma.size());
            double[] r = new double[n];
            for (int i = 0; i < n; i++) {
                r[i] = ratio(figure.applyAsDouble(rdma.get(i)), figure.applyAsDouble(tcp.get(i)));
            }
            return r;
        }

        /** The round whose latency median is the median of the rounds': its distribution is the one written. */
        Figures medianLatencyRound(String transport) {
            List<Figures> sorted = new ArrayList<>(rounds(transport));
            sorted.sort(Comparator.comparingDouble(f -> f.percentileMicros(50)));
            return sorted.get((sorted.size() - 1) / 2);
        }

        double median(String transport, ToDoubleFunction<Figures> figure) {
            return ArtemisTransportBenchmark.median(values(transport, figure));
        }
    }

    private static final double[] PERCENTILES = {50, 90, 99, 99.9};

    static String percentileName(double p) {
        return "p" + (p == (int) p ? Integer.toString((int) p) : Double.toString(p));
    }

    static double median(double[] values) {
        double[] s = values.clone();
        Arrays.sort(s);
        int n = s.length;
        return n == 0 ? Double.NaN : n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    }

    /** "median (min..max)" of the rounds' values. */
    private static String spread(double[] values, String format) {
        double[] s = values.clone();
        Arrays.sort(s);
        String median = String.format(Locale.ROOT, format, median(s));
        if (s.length < 2) {
            return median;
        }
        return median + " (" + String.format(Locale.ROOT, format, s[0]) + ".."
                + String.format(Locale.ROOT, format, s[s.length - 1]) + ")";
    }

    private static void print(Comparison c, Settings settings) {
        System.out.println();
        System.out.printf(Locale.ROOT, "Artemis over Netty TCP vs RDMA: 1 KiB JMS messages, %s, one broker; median of "
                + "%d rounds (lowest..highest); RDMA/TCP taken round by round%n", c.scenario.label(), c.tcp.size());
        System.out.printf(Locale.ROOT, "%-28s %26s %26s %22s%n", "", "Netty TCP", "RDMA", "RDMA/TCP");
        row(c, "throughput, msg/s", Figures::messagesPerSecond, "%.0f");
        row(c, "CPU per message, us", Figures::cpuMicrosPerMessage, "%.1f");
        for (double p : PERCENTILES) {
            row(c, "latency " + percentileName(p) + ", us @" + settings.rate + "/s", f -> f.percentileMicros(p),
                    "%.0f");
        }
        row(c, "latency max, us", f -> f.latency.getMaxValue() / 1000.0, "%.0f");
        row(c, "CPU @" + settings.rate + "/s, % of a core", Figures::cpuPercentAtRate, "%.1f");
        System.out.println("(throughput: " + settings.throughputSeconds + " s all-out; latency: send to receive, "
                + c.tcp.get(0).latency.getTotalCount() + " messages a round at " + settings.rate + " msg/s in all; "
                + "CPU: the whole process, broker and clients)");
        for (String transport : new String[] {"tcp", "rdma"}) {
            printThreads(c, transport);
        }
    }

    private static void row(Comparison c, String label, ToDoubleFunction<Figures> figure, String format) {
        System.out.printf(Locale.ROOT, "%-28s %26s %26s %22s%n", label, spread(c.values("tcp", figure), format),
                spread(c.values("rdma", figure), format), spread(c.roundRatios(figure), "%.2f"));
    }

    /** Which threads the all-out phase kept busy, all rounds together, in CPU microseconds per message. */
    private static void printThreads(Comparison c, String transport) {
        List<Figures> rounds = c.rounds(transport);
        ThreadCpu.Usage usage = ThreadCpu.Usage.sum(rounds.stream().map(Figures::threads).toList());
        double messages = rounds.stream().mapToDouble(f -> f.threads.processNanos() / 1000.0
                / f.cpuMicrosPerMessage).sum();
        StringBuilder line = new StringBuilder();
        for (Map.Entry<String, Long> e : usage.top(8)) {
            line.append(String.format(Locale.ROOT, "%n    %7.1f  (kernel %6.1f)  %s", e.getValue() / 1000.0 / messages,
                    usage.kernelByGroup().getOrDefault(e.getKey(), 0L) / 1000.0 / messages, e.getKey()));
        }
        System.out.printf(Locale.ROOT, "  CPU by thread, all-out, %s (us per message, the kernel's part in brackets; "
                + "process %.1f, unattributed "
                + "%.1f (JIT compiling %d ms, GC)):%s%n", transport.equals("tcp") ? "Netty TCP" : "RDMA",
                usage.processNanos() / 1000.0 / messages, (usage.processNanos() - usage.attributed()) / 1000.0
                        / messages, usage.jitMillis(), line);
        if (transport.equals("rdma")) {
            ClientCounters k = ClientCounters.sum(rounds.stream().map(Figures::counters).toList());
            double n = rounds.stream().mapToLong(Figures::messages).sum();
            String loop = ClientCounters.loopStatisticsMissing
                    ? "its loop: no statistics (a connector from before them)"
                    : String.format(Locale.ROOT, "its loop: %.2f wake-ups, %.2f blocks, %.2f spins (%.0f %% caught a "
                            + "completion), %.1f us CPU", k.wakeUps / n, k.blocks / n, k.spins / n,
                            k.spins == 0 ? 0 : 100.0 * k.spinHits / k.spins, k.loopCpuNanos / 1000.0 / n);
            System.out.printf(Locale.ROOT, "  RDMA client transport, all-out, per message: %.2f frames sent, %.2f "
                    + "received, %.2f completions, %.3f credit stalls; %s%n", k.framesSent / n, k.framesReceived / n,
                    k.completions / n, k.creditStalls / n, loop);
        }
    }

    /** One line per scenario, RDMA/TCP ratios only, with the issue's targets. */
    private static void printSummary(List<Comparison> comparisons, Settings settings) {
        System.out.println();
        System.out.println("RDMA/TCP, median of the rounds' ratios (lowest..highest); throughput: higher is better, "
                + "latency and CPU: lower is better; latency @" + settings.rate + " msg/s");
        System.out.printf(Locale.ROOT, "%-26s %18s %18s %18s %18s %18s%n", "scenario", "throughput", "p50", "p99",
                "p99.9", "CPU per msg");
        for (Comparison c : comparisons) {
            System.out.printf(Locale.ROOT, "%-26s %18s %18s %18s %18s %18s%n", c.scenario.label(),
                    spread(c.roundRatios(Figures::messagesPerSecond), "%.2f"),
                    spread(c.roundRatios(f -> f.percentileMicros(50)), "%.2f"),
                    spread(c.roundRatios(f -> f.percentileMicros(99)), "%.2f"),
                    spread(c.roundRatios(f -> f.percentileMicros(99.9)), "%.2f"),
                    spread(c.roundRatios(Figures::cpuMicrosPerMessage), "%.2f"));
        }
        System.out.println();
        System.out.println("issue 11 targets (RDMA/TCP: throughput >= 1.5, median latency <= 0.6), median of the "
                + "rounds' ratios:");
        for (Comparison c : comparisons) {
            double[] throughput = c.roundRatios(Figures::messagesPerSecond);
            double[] p50 = c.roundRatios(f -> f.percentileMicros(50));
            System.out.printf(Locale.ROOT, "  %-26s throughput %.2f %s, p50 %.2f %s%n", c.scenario.label(),
                    median(throughput), verdict(median(throughput) >= 1.5,
                            Arrays.stream(throughput).allMatch(r -> r >= 1.5)),
                    median(p50), verdict(median(p50) <= 0.6, Arrays.stream(p50).allMatch(r -> r <= 0.6)));
        }
    }

    private static String verdict(boolean median, boolean everyRound) {
        return median ? (everyRound ? "holds (every round)" : "holds (median, not every round)") : "misses";
    }

    private static double ratio(double a, double b) {
        return b == 0 ? 0 : a / b;
    }

    /**
     * artemis-summary.csv (one row per scenario and transport: medians of the rounds, with throughput's and p50's
     * range), artemis-rounds.csv (every round), artemis-phases.csv (when each phase ran) and one .hgrm distribution
     * per scenario and transport (the round with the median p50), for Charts.
     */
    private static void write(Path out, List<Comparison> comparisons, Settings settings) throws IOException {
        Files.createDirectories(out);
        // the charts' titles carry this day, also when they are drawn again later from a copy of the folder
        Files.writeString(out.resolve(Charts.MEASURED_ON), LocalDate.now(ZoneOffset.UTC) + "\n");
        try (PrintWriter csv = new PrintWriter(Files.newBufferedWriter(out.resolve("artemis-summary.csv")));
             PrintWriter rounds = new PrintWriter(Files.newBufferedWriter(out.resolve("artemis-rounds.csv")))) {
            csv.println("delivery,pairs,transport,msgs_per_s,cpu_us_per_msg,p50_us,p90_us,p99_us,p999_us,max_us,"
                    + "rate,cpu_pct_at_rate,rounds,msgs_per_s_min,msgs_per_s_max,p50_us_min,p50_us_max");
            rounds.println("delivery,pairs,transport,round,msgs_per_s,cpu_us_per_msg,p50_us,p90_us,p99_us,p999_us,"
                    + "max_us,rate,cpu_pct_at_rate");
            for (Comparison c : comparisons) {
                for (String transport : new String[] {"tcp", "rdma"}) {
                    double[] mps = c.values(transport, Figures::messagesPerSecond);
                    double[] p50 = c.values(transport, f -> f.percentileMicros(50));
                    csv.printf(Locale.ROOT, "%s,%d,%s,%.0f,%.2f,%.1f,%.1f,%.1f,%.1f,%.1f,%d,%.1f,%d,%.0f,%.0f,%.1f,"
                                    + "%.1f%n", c.scenario.delivery(), c.scenario.pairs(), transport, median(mps),
                            c.median(transport, Figures::cpuMicrosPerMessage), median(p50),
                            c.median(transport, f -> f.percentileMicros(90)),
                            c.median(transport, f -> f.percentileMicros(99)),
                            c.median(transport, f -> f.percentileMicros(99.9)),
                            c.median(transport, f -> f.latency.getMaxValue() / 1000.0), settings.rate,
                            c.median(transport, Figures::cpuPercentAtRate), mps.length,
                            Arrays.stream(mps).min().orElse(0), Arrays.stream(mps).max().orElse(0),
                            Arrays.stream(p50).min().orElse(0), Arrays.stream(p50).max().orElse(0));
                    for (Figures f : c.rounds(transport)) {
                        rounds.printf(Locale.ROOT, "%s,%d,%s,%d,%.0f,%.2f,%.1f,%.1f,%.1f,%.1f,%.1f,%d,%.1f%n",
                                c.scenario.delivery(), c.scenario.pairs(), transport, f.round, f.messagesPerSecond,
                                f.cpuMicrosPerMessage, f.percentileMicros(50), f.percentileMicros(90),
                                f.percentileMicros(99), f.percentileMicros(99.9), f.latency.getMaxValue() / 1000.0,
                                settings.rate, f.cpuPercentAtRate);
                    }
                    Path hgrm = out.resolve(String.format(Locale.ROOT, "artemis-latency-%s-%d-%s.hgrm",
                            c.scenario.delivery(), c.scenario.pairs(), transport));
                    try (PrintStream ps = new PrintStream(Files.newOutputStream(hgrm), false, "UTF-8")) {
                        c.medianLatencyRound(transport).latency.outputPercentileDistribution(ps, 1000.0); // us
                    }
                }
            }
        }
        try (PrintWriter phases = new PrintWriter(Files.newBufferedWriter(out.resolve("artemis-phases.csv")))) {
            phases.println("delivery,pairs,transport,round,phase,start_epoch_ms,end_epoch_ms");
            for (Phase p : PHASES) {
                phases.printf(Locale.ROOT, "%s,%d,%s,%d,%s,%d,%d%n", p.scenario.delivery(), p.scenario.pairs(),
                        p.transport, p.round, p.name, p.startMillis, p.endMillis);
            }
        }
        System.out.println("artemis-bench: summary, rounds, phases and latency distributions in "
                + out.toAbsolutePath());
    }
}
