package dev.artemisrdma.it.bench;

import static dev.artemisrdma.it.bench.BenchEnv.env;
import static dev.artemisrdma.it.bench.BenchEnv.positive;
import static dev.artemisrdma.it.bench.BenchEnv.words;

import dev.artemisrdma.artemis.LinkReport;
import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.artemis.RdmaRuntime;
import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.TlsStores;
import dev.artemisrdma.it.artemis.LabBroker;
import dev.artemisrdma.it.bench.ArtemisTransportBenchmark.AllOut;
import dev.artemisrdma.it.bench.ArtemisTransportBenchmark.CpuMeter;
import dev.artemisrdma.it.bench.ArtemisTransportBenchmark.Scenario;
import dev.artemisrdma.it.bench.fabric.MemoryFabricSupplier;
import jakarta.jms.Connection;
import org.HdrHistogram.Histogram;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;

import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.ToDoubleFunction;

/**
 * What TLS costs (issue 38), four ways against one broker: our RDMA transport plain and with TLS, Artemis's Netty TCP
 * plain and with TLS, the two TLS acceptors with the same stores (the project's test set: broker.p12, a client
 * certificate needed, trust.p12) and the same engine (the JDK's {@code SSLEngine}: Netty's default provider, and the
 * one our TlsChannel runs). One JMS producer/consumer pair, non-persistent messages of each size (1 KiB and 64 KiB by
 * default), per round and size each transport in turn (the order rotates every round): throughput all-out with CPU
 * microseconds per message (the broker's and the clients', both processes in the lab), then latency at a fixed rate
 * (send to receive, HdrHistogram) and the CPU it costs. Figures are medians of the rounds; the ratios TLS over plain
 * (RDMA TLS / RDMA, Netty TLS / Netty TCP) are taken round by round, each TLS round against the plain round of the
 * same transport, size and round. The goal: TLS over RDMA costs no more over plain RDMA than Netty TLS costs
 * over Netty plain, in CPU per message: checked on the ratios, with the added microseconds beside them.
 *
 * <p>{@code lab} (in the lab guest: the broker in a JVM of its own, {@link BenchBrokerMain}, on rxe0) or {@code host}
 * (no lab: one JVM, the broker in it, RDMA over the in-memory {@code MemoryFabric}, see artemis-host-bench), then the
 * results folder. Knobs (environment): {@code SIZES} ("1024 65536"), {@code ROUNDS} (3), {@code TRANSPORTS} ("rdma
 * rdma-tls tcp tcp-tls"), {@code THROUGHPUT_SECONDS} (lab 3, host 2), {@code RATE} (msg/s of the latency phase: lab
 * 50, host 1000), {@code LATENCY_SECONDS} (lab 5, host 2), {@code WARMUP_SECONDS} (the warm-up's bound: lab 150, host
 * 90), {@code BROKER_JVM_OPTS} (lab: the broker JVM's, {@code -Xmx1g}). System property {@code tls.bench.commit}: the
 * commit measured, written into the files.
 */
public final class TlsCostBenchmark {

    static final List<String> ALL = List.of("rdma", "rdma-tls", "tcp", "tcp-tls");
    private static final int RDMA_PORT = 61700;
    private static final int RDMA_TLS_PORT = 61701;
    private static final int TCP_PORT = 61616;
    private static final int TCP_TLS_PORT = 61617;
    private static final double WARMUP_PHASE_SECONDS = 2;
    private static final double SETTLED_JIT_SHARE = 0.10;
    private static final Scenario SCENARIO = new Scenario(false, 1);

    record Settings(String place, List<Integer> sizes, int rounds, List<String> transports, double throughputSeconds,
                    int rate, double latencySeconds, int warmupSeconds, List<String> brokerJvmOptions) {

        static Settings fromEnvironment(String place) {
            boolean lab = place.equals("lab");
            List<Integer> sizes = new ArrayList<>();
            for (String s : words("SIZES", "1024 65536")) {
                sizes.add(positive("SIZES", s));
            }
            List<String> transports = new ArrayList<>();
            for (String t : words("TRANSPORTS", String.join(" ", ALL))) {
                if (!ALL.contains(t)) {
                    throw new IllegalArgumentException("TRANSPORTS takes " + ALL + ", got '" + t + "'");
                }
                transports.add(t);
            }
            return new Settings(place, sizes, positive("ROUNDS", env("ROUNDS", "3")), transports,
                    Double.parseDouble(env("THROUGHPUT_SECONDS", lab ? "3" : "2")),
                    positive("RATE", env("RATE", lab ? "50" : "1000")),
                    Double.parseDouble(env("LATENCY_SECONDS", lab ? "5" : "2")),
                    positive("WARMUP_SECONDS", env("WARMUP_SECONDS", lab ? "150" : "90")),
                    words("BROKER_JVM_OPTS", "-Xmx1g"));
        }
    }

    /** One round of one size over one transport. */
    record Figures(String transport, int size, int round, double messagesPerSecond, double cpuMicrosPerMessage,
                   Histogram latency, double cpuPercentAtRate, ThreadCpu.Usage threads, long messages) {

        double percentileMicros(double p) {
            return latency.getValueAtPercentile(p) / 1000.0;
        }
    }

    private TlsCostBenchmark() {
    }

    static String label(String transport) {
        return switch (transport) {
            case "rdma" -> "RDMA";
            case "rdma-tls" -> "RDMA TLS";
            case "tcp" -> "Netty TCP";
            case "tcp-tls" -> "Netty TLS";
            default -> transport;
        };
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1 || !(args[0].equals("lab") || args[0].equals("host"))) {
            System.err.println("TlsCostBenchmark lab|host [RESULTS_DIR]");
            System.exit(2);
        }
        Settings settings;
        try {
            settings = Settings.fromEnvironment(args[0]);
        } catch (IllegalArgumentException e) {
            System.err.println("tls-bench: " + e.getMessage());
            System.exit(2);
            return;
        }
        boolean lab = settings.place.equals("lab");
        Path out = Path.of(args.length > 1 ? args[1] : System.getenv().getOrDefault("RDMA_LAB_RESULTS", "."));
        Files.createDirectories(out);
        String host = lab ? System.getenv().getOrDefault("RDMA_LAB_ADDR0", "10.77.0.1") : "127.0.0.1";
        if (!lab) {
            System.setProperty(RdmaRuntime.FABRIC_PROPERTY, MemoryFabricSupplier.class.getName());
        }
        String commit = System.getProperty("tls.bench.commit", "unknown");
        String header = String.format(Locale.ROOT, "tls-bench (%s): %s UTC, commit %s; %s; JVM %s %s; %d CPUs; "
                        + "non-persistent, 1 pair, sizes %s, %d rounds of %s (order rotating), %.0f s all-out, "
                        + "latency at %d msg/s for %.0f s", settings.place,
                java.time.LocalDateTime.now(ZoneOffset.UTC).withNano(0), commit,
                lab ? "Soft-RoCE lab guest, broker JVM " + settings.brokerJvmOptions + " on " + host
                        : "host, one JVM, RDMA over MemoryFabric on " + host,
                System.getProperty("java.vm.version"),
                java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments(),
                Runtime.getRuntime().availableProcessors(), settings.sizes, settings.rounds, settings.transports,
                settings.throughputSeconds, settings.rate, settings.latencySeconds);
        System.out.println(header);
        JavaProcess brokerJvm = null;
        LabBroker inProcess = null;
        if (lab) {
            brokerJvm = JavaProcess.driven("tls-bench-broker", BenchBrokerMain.class).jvm(settings.brokerJvmOptions)
                    .start(host, Integer.toString(RDMA_PORT), Integer.toString(TCP_PORT), "",
                            "tls:" + RDMA_TLS_PORT + ":" + TCP_TLS_PORT);
            brokerJvm.await("READY", 300);
        } else {
            inProcess = LabBroker.start(host, RDMA_PORT, Files.createTempDirectory("tls-bench-broker"), false,
                    TCP_PORT, Map.of(), Map.of("rdma-tls", BenchBrokerMain.tlsAcceptor(
                            Integer.toString(RDMA_TLS_PORT))),
                    Map.of("tcp-tls", BenchBrokerMain.tlsAcceptor(Integer.toString(TCP_TLS_PORT))));
        }
        CpuMeter meter = new CpuMeter(brokerJvm);
        String tls = TlsStores.query("client").substring(1);
        Map<String, ActiveMQConnectionFactory> factories = new LinkedHashMap<>();
        List<Figures> results = new ArrayList<>();
        String sessions;
        try (AutoCloseable broker = lab ? brokerJvm : inProcess) {
            List<Connection> keepers = new ArrayList<>();
            for (String t : settings.transports) {
                factories.put(t, switch (t) {
                    case "rdma" -> RdmaConnectionFactories.create("rdma://" + host + ":" + RDMA_PORT);
                    case "rdma-tls" -> RdmaConnectionFactories.create("rdma://" + host + ":" + RDMA_TLS_PORT + "?"
                            + tls);
                    case "tcp" -> new ActiveMQConnectionFactory("tcp://" + host + ":" + TCP_PORT);
                    // verifyHost as the RDMA connector's default, the JDK's engine (Netty's default) as ours
                    default -> new ActiveMQConnectionFactory("tcp://" + host + ":" + TCP_TLS_PORT + "?" + tls
                            + "&verifyHost=true&sslProvider=JDK");
                });
                keepers.add(factories.get(t).createConnection()); // one idle connection each, as long-lived clients
            }
            if (lab) {
                brokerJvm.send("sessions");
                sessions = brokerJvm.await("SESSIONS", 60);
            } else {
                sessions = "SESSIONS " + LinkReport.tlsSessions(inProcess.server());
            }
            System.out.println("the broker's TLS connections (the idle ones): " + sessions.substring(9));
            warmUp(factories, settings, meter);
            for (int round = 0; round < settings.rounds; round++) {
                for (int size : settings.sizes) {
                    int n = settings.transports.size();
                    for (int k = 0; k < n; k++) {
                        String name = settings.transports.get((k + round) % n); // each transport first in turn
                        results.add(measure(factories.get(name), name, size, round, settings, meter));
                    }
                }
            }
            for (Connection c : keepers) {
                c.close();
            }
        } finally {
            for (ActiveMQConnectionFactory cf : factories.values()) {
                cf.close();
            }
        }
        StringWriter text = new StringWriter();
        PrintWriter report = new PrintWriter(text);
        report.println(header);
        report.println("TLS sessions: " + sessions.substring(9));
        for (int size : settings.sizes) {
            print(report, results, size, settings);
        }
        printSummary(report, results, settings);
        report.flush();
        System.out.print(text);
        write(out, text.toString(), results, settings, commit);
        System.exit(0);
    }

    private static Figures measure(ActiveMQConnectionFactory cf, String name, int size, int round, Settings settings,
                                   CpuMeter meter) throws Exception {
        String queue = "tls." + size + "." + name + "." + round;
        AllOut a = ArtemisTransportBenchmark.throughput(cf, queue, SCENARIO, settings.throughputSeconds, meter, size);
        double[] cpu = new double[1];
        Histogram h = ArtemisTransportBenchmark.fixedRate(cf, queue + ".lat", SCENARIO, settings.rate,
                settings.latencySeconds, cpu, meter, size);
        System.out.printf(Locale.ROOT, "%s B %-9s round %d: %.0f msg/s, %.1f us CPU/msg, JIT %d ms; @%d/s p50 %.1f us, "
                        + "p99 %.1f us, CPU %.0f %% of a core%n", size, label(name), round, a.messagesPerSecond(),
                a.cpuMicrosPerMessage(), a.threads().jitMillis(), settings.rate, h.getValueAtPercentile(50) / 1000.0,
                h.getValueAtPercentile(99) / 1000.0, cpu[0]);
        return new Figures(name, size, round, a.messagesPerSecond(), a.cpuMicrosPerMessage(), h, cpu[0], a.threads(),
                a.messages());
    }

    /**
     * All-out phases of every size over every transport until the JIT settled: once every size and transport ran,
     * until one pass over them spent at most {@value #SETTLED_JIT_SHARE} of its time compiling (both JVMs' compilers
     * in the lab); {@code WARMUP_SECONDS} at most.
     */
    private static void warmUp(Map<String, ActiveMQConnectionFactory> factories, Settings settings, CpuMeter meter)
            throws Exception {
        long start = System.nanoTime();
        long deadline = start + TimeUnit.SECONDS.toNanos(settings.warmupSeconds);
        for (int pass = 0; ; pass++) {
            long passStart = System.nanoTime();
            long jitMillis = 0;
            StringBuilder rates = new StringBuilder();
            for (int size : settings.sizes) {
                for (String t : settings.transports) {
                    AllOut a = ArtemisTransportBenchmark.throughput(factories.get(t), "warmup." + pass + "." + size
                            + "." + t, SCENARIO, WARMUP_PHASE_SECONDS, meter, size);
                    jitMillis += a.threads().jitMillis();
                    rates.append(rates.length() == 0 ? "" : " / ").append(Math.round(a.messagesPerSecond()));
                }
            }
            double share = jitMillis / (TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - passStart) + 1.0);
            System.out.printf(Locale.ROOT, "warm-up %d: %s %s msg/s (sizes %s), JIT compiling %.0f %% of the time%n",
                    pass, String.join(" / ", settings.transports), rates, settings.sizes, 100 * share);
            if (share <= SETTLED_JIT_SHARE) {
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

    // ---------------------------------------------------------------- reporting

    private static List<Figures> rounds(List<Figures> results, String transport, int size) {
        return results.stream().filter(f -> f.transport.equals(transport) && f.size == size)
                .sorted(Comparator.comparingInt(Figures::round)).toList();
    }

    private static double[] values(List<Figures> results, String transport, int size, ToDoubleFunction<Figures> f) {
        return rounds(results, transport, size).stream().mapToDouble(f).toArray();
    }

    /** TLS's figure of each round over plain's of the same round and size. */
    private static double[] ratios(List<Figures> results, String tls, String plain, int size,
                                   ToDoubleFunction<Figures> f) {
        double[] a = values(results, tls, size, f);
        double[] b = values(results, plain, size, f);
        double[] r = new double[Math.min(a.length, b.length)];
        for (int i = 0; i < r.length; i++) {
            r[i] = b[i] == 0 ? Double.NaN : a[i] / b[i];
        }
        return r;
    }

    /** TLS's figure of each round minus plain's of the same round and size. */
    private static double[] differences(List<Figures> results, String tls, String plain, int size,
                                        ToDoubleFunction<Figures> f) {
        double[] a = values(results, tls, size, f);
        double[] b = values(results, plain, size, f);
        double[] r = new double[Math.min(a.length, b.length)];
        for (int i = 0; i < r.length; i++) {
            r[i] = a[i] - b[i];
        }
        return r;
    }

    private static String spread(double[] values, String format) {
        if (values.length == 0) {
            return "-";
        }
        double[] s = values.clone();
        Arrays.sort(s);
        String median = String.format(Locale.ROOT, format, ArtemisTransportBenchmark.median(s));
        return s.length < 2 ? median : median + " (" + String.format(Locale.ROOT, format, s[0]) + ".."
                + String.format(Locale.ROOT, format, s[s.length - 1]) + ")";
    }

    private static final String[] FIGURES = {"throughput, msg/s", "CPU per message, us", "latency p50, us",
        "latency p99, us", "CPU at the rate, % of a core"};

    private static ToDoubleFunction<Figures> figure(int i) {
        return switch (i) {
            case 0 -> Figures::messagesPerSecond;
            case 1 -> Figures::cpuMicrosPerMessage;
            case 2 -> f -> f.percentileMicros(50);
            case 3 -> f -> f.percentileMicros(99);
            default -> Figures::cpuPercentAtRate;
        };
    }

    private static String format(int i) {
        return i == 0 ? "%.0f" : i == 4 ? "%.0f" : "%.1f";
    }

    private static void print(PrintWriter out, List<Figures> results, int size, Settings settings) {
        out.println();
        out.printf(Locale.ROOT, "%d-byte JMS messages, non-persistent, 1 pair (%s): median of %d rounds "
                + "(lowest..highest); TLS/plain taken round by round; latency at %d msg/s%n", size, settings.place,
                settings.rounds, settings.rate);
        out.printf(Locale.ROOT, "%-30s", "");
        for (String t : settings.transports) {
            out.printf(Locale.ROOT, " %24s", label(t));
        }
        boolean rdmaPair = settings.transports.containsAll(List.of("rdma", "rdma-tls"));
        boolean tcpPair = settings.transports.containsAll(List.of("tcp", "tcp-tls"));
        out.printf(Locale.ROOT, "%s%s%n", rdmaPair ? String.format(Locale.ROOT, " %22s", "RDMA TLS/RDMA") : "",
                tcpPair ? String.format(Locale.ROOT, " %22s", "Netty TLS/TCP") : "");
        for (int i = 0; i < FIGURES.length; i++) {
            out.printf(Locale.ROOT, "%-30s", FIGURES[i]);
            for (String t : settings.transports) {
                out.printf(Locale.ROOT, " %24s", spread(values(results, t, size, figure(i)), format(i)));
            }
            if (rdmaPair) {
                out.printf(Locale.ROOT, " %22s", spread(ratios(results, "rdma-tls", "rdma", size, figure(i)),
                        "%.2f"));
            }
            if (tcpPair) {
                out.printf(Locale.ROOT, " %22s", spread(ratios(results, "tcp-tls", "tcp", size, figure(i)), "%.2f"));
            }
            out.println();
        }
        out.println("(throughput: all-out, end to end; CPU per message: " + (settings.place.equals("lab")
                ? "the broker's JVM and the clients' JVM together" : "the one JVM, broker and clients")
                + ", over the all-out phase)");
        for (String t : settings.transports) {
            List<Figures> rs = rounds(results, t, size);
            ThreadCpu.Usage usage = ThreadCpu.Usage.sum(rs.stream().map(Figures::threads).toList());
            double messages = rs.stream().mapToLong(Figures::messages).sum();
            StringBuilder line = new StringBuilder();
            for (Map.Entry<String, Long> e : usage.top(6)) {
                line.append(String.format(Locale.ROOT, "%n    %9.1f  (kernel %7.1f)  %s", e.getValue() / 1000.0
                        / messages, usage.kernelByGroup().getOrDefault(e.getKey(), 0L) / 1000.0 / messages,
                        e.getKey()));
            }
            out.printf(Locale.ROOT, "  CPU by thread, all-out, %s, %d B (us per message; process %.1f, JIT %d ms):%s%n",
                    label(t), size, usage.processNanos() / 1000.0 / messages, usage.jitMillis(), line);
        }
    }

    private static void printSummary(PrintWriter out, List<Figures> results, Settings settings) {
        if (!settings.transports.containsAll(ALL)) {
            return;
        }
        out.println();
        out.printf(Locale.ROOT, "What TLS costs (%s), median of the rounds' ratios TLS/plain (lowest..highest), and "
                + "the CPU TLS adds per message (TLS minus plain, us)%n", settings.place);
        out.printf(Locale.ROOT, "%-8s %-14s %20s %20s %20s %20s %20s%n", "size", "transport", "throughput",
                "CPU per message", "p50", "p99", "CPU added, us");
        for (int size : settings.sizes) {
            for (String[] pair : new String[][] {{"rdma-tls", "rdma"}, {"tcp-tls", "tcp"}}) {
                out.printf(Locale.ROOT, "%-8s %-14s %20s %20s %20s %20s %20s%n", size + " B",
                        pair[0].equals("rdma-tls") ? "RDMA" : "Netty TCP",
                        spread(ratios(results, pair[0], pair[1], size, figure(0)), "%.2f"),
                        spread(ratios(results, pair[0], pair[1], size, figure(1)), "%.2f"),
                        spread(ratios(results, pair[0], pair[1], size, figure(2)), "%.2f"),
                        spread(ratios(results, pair[0], pair[1], size, figure(3)), "%.2f"),
                        spread(differences(results, pair[0], pair[1], size, figure(1)), "%.1f"));
            }
        }
        out.println();
        out.println("issue 38's goal: TLS over RDMA costs no more over plain RDMA than Netty TLS costs over Netty plain, "
                + "in CPU per message (median of the rounds' ratios; the added microseconds beside):");
        for (int size : settings.sizes) {
            double rdma = ArtemisTransportBenchmark.median(ratios(results, "rdma-tls", "rdma", size, figure(1)));
            double tcp = ArtemisTransportBenchmark.median(ratios(results, "tcp-tls", "tcp", size, figure(1)));
            double rdmaAdded = ArtemisTransportBenchmark.median(differences(results, "rdma-tls", "rdma", size,
                    figure(1)));
            double tcpAdded = ArtemisTransportBenchmark.median(differences(results, "tcp-tls", "tcp", size,
                    figure(1)));
            out.printf(Locale.ROOT, "  %6d B: RDMA TLS/RDMA %.2f, Netty TLS/TCP %.2f: %s; added %.1f us against %.1f us"
                    + " (%s)%n", size, rdma, tcp, rdma <= tcp ? "holds" : "misses", rdmaAdded, tcpAdded,
                    rdmaAdded <= tcpAdded ? "no more" : "more");
        }
    }

    /**
     * tls-PLACE-summary.txt (the tables), tls-PLACE-summary.csv (medians per size and transport, with the TLS/plain
     * ratios), tls-PLACE-rounds.csv (every round), one .hgrm per size and transport (the round with the median p50),
     * measured-on.txt; each file names the date and commit.
     */
    private static void write(Path out, String text, List<Figures> results, Settings settings, String commit)
            throws IOException {
        String day = LocalDate.now(ZoneOffset.UTC).toString();
        String prefix = "tls-" + settings.place;
        Files.writeString(out.resolve(Charts.MEASURED_ON), day + "\n");
        Files.writeString(out.resolve(prefix + "-summary.txt"), text);
        try (PrintWriter csv = new PrintWriter(Files.newBufferedWriter(out.resolve(prefix + "-summary.csv")));
             PrintWriter rounds = new PrintWriter(Files.newBufferedWriter(out.resolve(prefix + "-rounds.csv")))) {
            csv.println("measured_on,commit,place,size,transport,rounds,msgs_per_s,cpu_us_per_msg,p50_us,p99_us,"
                    + "cpu_pct_at_rate,rate,tls_over_plain_msgs_per_s,tls_over_plain_cpu_us_per_msg,"
                    + "tls_over_plain_p50,tls_over_plain_p99,tls_minus_plain_cpu_us_per_msg");
            rounds.println("measured_on,commit,place,size,transport,round,msgs_per_s,cpu_us_per_msg,p50_us,p99_us,"
                    + "cpu_pct_at_rate,rate,jit_ms");
            for (int size : settings.sizes) {
                for (String t : settings.transports) {
                    String plain = t.endsWith("-tls") ? t.substring(0, t.length() - 4) : null;
                    boolean paired = plain != null && settings.transports.contains(plain);
                    csv.printf(Locale.ROOT, "%s,%s,%s,%d,%s,%d,%.0f,%.2f,%.1f,%.1f,%.1f,%d,%s,%s,%s,%s,%s%n", day,
                            commit, settings.place, size, t, rounds(results, t, size).size(),
                            median(results, t, size, figure(0)), median(results, t, size, figure(1)),
                            median(results, t, size, figure(2)), median(results, t, size, figure(3)),
                            median(results, t, size, figure(4)), settings.rate,
                            paired ? ratio(results, t, plain, size, 0) : "",
                            paired ? ratio(results, t, plain, size, 1) : "",
                            paired ? ratio(results, t, plain, size, 2) : "",
                            paired ? ratio(results, t, plain, size, 3) : "",
                            paired ? String.format(Locale.ROOT, "%.2f", ArtemisTransportBenchmark.median(
                                    differences(results, t, plain, size, figure(1)))) : "");
                    for (Figures f : rounds(results, t, size)) {
                        rounds.printf(Locale.ROOT, "%s,%s,%s,%d,%s,%d,%.0f,%.2f,%.1f,%.1f,%.1f,%d,%d%n", day, commit,
                                settings.place, size, t, f.round, f.messagesPerSecond, f.cpuMicrosPerMessage,
                                f.percentileMicros(50), f.percentileMicros(99), f.cpuPercentAtRate, settings.rate,
                                f.threads.jitMillis());
                    }
                    List<Figures> sorted = new ArrayList<>(rounds(results, t, size));
                    sorted.sort(Comparator.comparingDouble(f -> f.percentileMicros(50)));
                    if (!sorted.isEmpty()) {
                        Path hgrm = out.resolve(String.format(Locale.ROOT, "%s-latency-%d-%s.hgrm", prefix, size, t));
                        try (PrintStream ps = new PrintStream(Files.newOutputStream(hgrm), false, "UTF-8")) {
                            ps.printf(Locale.ROOT, "# tls-bench (%s) %s, commit %s: %s, %d B, %d msg/s, the round "
                                    + "with the median p50 (microseconds)%n", settings.place, day, commit, label(t),
                                    size, settings.rate);
                            sorted.get((sorted.size() - 1) / 2).latency.outputPercentileDistribution(ps, 1000.0);
                        }
                    }
                }
            }
        }
        System.out.println("tls-bench: " + prefix + "-summary.txt, -summary.csv, -rounds.csv and latency "
                + "distributions in " + out.toAbsolutePath());
    }

    private static double median(List<Figures> results, String t, int size, ToDoubleFunction<Figures> f) {
        return ArtemisTransportBenchmark.median(values(results, t, size, f));
    }

    private static String ratio(List<Figures> results, String tls, String plain, int size, int figure) {
        return String.format(Locale.ROOT, "%.3f", ArtemisTransportBenchmark.median(ratios(results, tls, plain, size,
                figure(figure))));
    }
}
