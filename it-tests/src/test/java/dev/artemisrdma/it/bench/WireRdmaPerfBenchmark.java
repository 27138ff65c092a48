package dev.artemisrdma.it.bench;

import static dev.artemisrdma.it.bench.BenchEnv.env;
import static dev.artemisrdma.it.bench.BenchEnv.positive;
import static dev.artemisrdma.it.bench.BenchEnv.words;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.hosts.LabHost;
import dev.artemisrdma.it.hosts.WireCounters;
import org.HdrHistogram.Histogram;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The transport against perftest across the two-host lab's wire, in one boot (issue 35's like-with-like ratios):
 * client on host A, server on host B, for each size ({@code SIZES}, 64 B, 1 KiB, 64 KiB) {@code ib_send_lat -R} and
 * the transport's ping-pong ({@code RdmaPerf --layer transport --mode lat}), {@code ib_send_bw -R} and the
 * transport's stream ({@code --mode bw}), in rounds that take the four in turn per size (the lab drifts within a boot,
 * so each tool meets the same drift); each figure is the median of the rounds, with the transport/perftest ratio.
 * Then JMS across the wire: {@code artemis-bench}'s broker ({@link BenchBrokerMain}: an RDMA and a Netty TCP acceptor
 * on B's wire address) on B, one non-persistent producer/consumer pair on A, 1 KiB and 64 KiB
 * ({@code JMS_SIZES}): all-out message rate and, at a fixed rate, send-to-receive p50/p99 (both ends on A's clock),
 * over RDMA and over Netty TCP ({@code JMS}, "rdma tcp"; "-" skips JMS). Both hosts' NIC and rxe counters, read
 * around each part, prove that it crossed the wire. Run by {@code it-tests/bench/wire-rdmaperf}.
 *
 * <p>Knobs (environment): {@code ROUNDS} (2: a round takes about 160 s, so that the whole run stays under 10 minutes),
 * {@code SIZES}, {@code LAT_ITERS} (1,000 round trips; a fifth above
 * 4 KiB), {@code BW_ITERS} (20,000 messages; a tenth above 4 KiB), {@code WARMUP} (the transport client's warm-up
 * count: as many as it measures by default), {@code RDMAPERF_JVM_OPTS} (the RdmaPerf server's and clients' JVM
 * options, -Xmx512m; {@code -Drdmaperf.transport.KEY=VALUE} sets a transport key on both ends), {@code JMS},
 * {@code JMS_SIZES}, {@code JMS_ROUNDS} (1), {@code THROUGHPUT_SECONDS} (5), {@code RATE} (50 msg/s) and
 * {@code LARGE_RATE} (10 msg/s, above 4 KiB, for twice as long), {@code LATENCY_SECONDS} (10); {@code COMMIT} names
 * the build in the output.
 */
public final class WireRdmaPerfBenchmark {

    private static final Pattern RESULT = Pattern.compile("RESULT layer=\\S+ mode=(\\S+) size=\\d+ iters=\\d+ "
            + "p50_us=(\\S+) p99_us=(\\S+) msgs_per_s=(\\d+)");
    private static final Pattern MIN = Pattern.compile("rdmaperf: min_us=(\\S+)");
    private static final Pattern JIT = Pattern.compile("rdmaperf: jit_ms=(\\d+)");
    private static final int PERF_PORT = 18600;
    /** The RdmaPerf server's and clients' JVM options: RDMAPERF_JVM_OPTS, as rdmaperf-bench's (-Xmx512m). */
    private static final List<String> PERF_JVM = words("RDMAPERF_JVM_OPTS", "-Xmx512m");

    private final Path out;
    private final String server = LabHost.b().wireAddress();
    private final int rounds = positive("ROUNDS", env("ROUNDS", "2"));
    private final List<Integer> sizes = words("SIZES", "64 1024 65536").stream()
            .map(s -> positive("SIZES", s)).toList();
    private final int latIters = positive("LAT_ITERS", env("LAT_ITERS", "1000"));
    private final int bwIters = positive("BW_ITERS", env("BW_ITERS", "20000"));
    private final String warmup = env("WARMUP", "");
    private int perftestPort = 18700;
    /** Each tool's figures by size, one entry a round: {p50, p99, min, msg/s} (lat) or {msg/s} (bw). */
    private final Map<String, List<double[]>> figures = new LinkedHashMap<>();
    private final StringBuilder roundsLog = new StringBuilder();

    private WireRdmaPerfBenchmark(Path out) {
        this.out = out;
    }

    public static void main(String[] args) throws Exception {
        LabHost.requireTwoHosts();
        Path out = JavaProcess.resultsDir();
        WireRdmaPerfBenchmark bench = new WireRdmaPerfBenchmark(out);
        StringBuilder report = new StringBuilder();
        report.append(String.format(Locale.ROOT, "wire-rdmaperf: %s, commit %s; client on host A (%s), server on host "
                + "B (%s), across the wire%n", java.time.ZonedDateTime.now(java.time.ZoneOffset.UTC).format(
                java.time.format.DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'")), env("COMMIT", "unknown"),
                LabHost.a().wireAddress(), bench.server));
        System.out.print(report);
        long t0 = System.nanoTime();
        report.append(bench.perf());
        long t1 = System.nanoTime();
        List<String> jms = words("JMS", "rdma tcp");
        if (!jms.equals(List.of("-"))) {
            report.append('\n').append(bench.jms(jms));
        }
        long t2 = System.nanoTime();
        report.append(String.format(Locale.ROOT, "%nlab time: perftest and transport %.0f s, JMS %.0f s%n",
                (t1 - t0) / 1e9, (t2 - t1) / 1e9));
        System.out.print(report.substring(report.indexOf("\n") + 1));
        Files.writeString(out.resolve("wire-rdmaperf.txt"), report.toString());
        Files.writeString(out.resolve("wire-rdmaperf-rounds.txt"), bench.roundsLog.toString());
        System.exit(0);
    }

    // ------------------------------------------------------------------------------------ perftest and transport

    private String perf() throws Exception {
        try (JavaProcess perfServer = JavaProcess.java("rdmaperf-server").on(LabHost.b()).jvm(PERF_JVM)
                .readyWhen("rdmaperf server", 180).log(out.resolve("rdmaperf-server.log"), false)
                .start("dev.artemisrdma.tools.RdmaPerf", "server", "--bind", server, "--port",
                        Integer.toString(PERF_PORT))) {
            // the server's JIT compiles its echo path on a rehearsal run, not in the first measured one
            transport("lat", 1024, 2000, false);
            WireCounters a0 = LabHost.a().counters();
            WireCounters b0 = LabHost.b().counters();
            for (int round = 1; round <= rounds; round++) {
                long roundStart = System.nanoTime();
                for (int size : sizes) {
                    double[] ibLat = perftest("lat", size, itersFor(latIters, size, 5));
                    double[] tLat = transport("lat", size, itersFor(latIters, size, 5), true);
                    double[] ibBw = perftest("bw", size, itersFor(bwIters, size, 10));
                    double[] tBw = transport("bw", size, itersFor(bwIters, size, 10), true);
                    record("ib_send_lat", size, ibLat);
                    record("transport lat", size, tLat);
                    record("ib_send_bw", size, ibBw);
                    record("transport bw", size, tBw);
                    String line = String.format(Locale.ROOT, "round %d %6d B: ib_send_lat p50 %.1f us p99 %.1f us, "
                            + "transport p50 %.1f us p99 %.1f us (JIT %d ms); ib_send_bw %.0f msg/s, transport "
                            + "%.0f msg/s (JIT %d ms)%n", round, size, ibLat[0], ibLat[1], tLat[0], tLat[1],
                            (long) tLat[4], ibBw[3], tBw[3], (long) tBw[4]);
                    System.out.print(line);
                    roundsLog.append(line);
                }
                String took = String.format(Locale.ROOT, "round %d took %.0f s%n", round,
                        (System.nanoTime() - roundStart) / 1e9);
                System.out.print(took);
                roundsLog.append(took);
            }
            WireCounters a = LabHost.a().counters().since(a0);
            WireCounters b = LabHost.b().counters().since(b0);
            // every connection of this part runs from A to B: B's rxe counts only what crossed
            b.requireRoceCrossedTheWire(10_000);
            StringBuilder t = new StringBuilder();
            t.append(String.format(Locale.ROOT, "perftest and the transport across the wire, %s (latency one-way; "
                    + "ratios transport / perftest)%n", rounds == 2 ? "means of 2 rounds" : "medians of " + rounds
                    + " rounds"));
            t.append(String.format(Locale.ROOT, "%-7s | %-23s | %-34s | %-20s | %-14s | %-24s%n", "size",
                    "ib_send_lat p50 / p99", "transport p50 / p99 (x ib)", "min: ib / transport", "ib_send_bw",
                    "transport stream (x ib)"));
            for (int size : sizes) {
                double ib50 = median("ib_send_lat", size, 0);
                double ib99 = median("ib_send_lat", size, 1);
                double t50 = median("transport lat", size, 0);
                double t99 = median("transport lat", size, 1);
                double ibMin = lowest("ib_send_lat", size, 2);
                double tMin = lowest("transport lat", size, 2);
                double ibRate = median("ib_send_bw", size, 3);
                double tRate = median("transport bw", size, 3);
                t.append(String.format(Locale.ROOT, "%-7d | %8.1f / %8.1f us | %8.1f / %8.1f us (%4.2fx / %4.2fx) "
                        + "| %7.1f / %7.1f us | %8.0f msg/s | %8.0f msg/s (%4.2fx)%n", size, ib50, ib99, t50, t99,
                        t50 / ib50, t99 / ib99, ibMin, tMin, ibRate, tRate, tRate / ibRate));
            }
            t.append(String.format(Locale.ROOT, "(%d round trips and %d streamed messages per run up to 4 KiB, a fifth "
                    + "and a tenth above; transport client warm-up %s, then measured; each run a fresh client "
                    + "JVM; ib_send_bw's rate from its BW average)%n", latIters, bwIters,
                    warmup.isEmpty() ? "as long as its measured window" : warmup + " messages"));
            t.append("crossing: ").append(a.summary()).append("; ").append(b.summary()).append('\n');
            return t.toString();
        }
    }

    private static int itersFor(int iters, int size, int divisor) {
        return size <= 4096 ? iters : Math.max(100, iters / divisor);
    }

    private void record(String tool, int size, double[] values) {
        figures.computeIfAbsent(tool + " " + size, k -> new ArrayList<>()).add(values);
    }

    private double median(String tool, int size, int column) {
        List<Double> v = new ArrayList<>(figures.get(tool + " " + size).stream().map(r -> r[column]).toList());
        v.sort(Double::compare);
        int n = v.size();
        return n % 2 == 1 ? v.get(n / 2) : (v.get(n / 2 - 1) + v.get(n / 2)) / 2;
    }

    private double lowest(String tool, int size, int column) {
        return figures.get(tool + " " + size).stream().mapToDouble(r -> r[column]).min().orElse(Double.NaN);
    }

    /**
     * One perftest run: its server on B, its client here; {p50 (t_typical), p99, min, msg/s} of latency, {0, 0, 0,
     * msg/s} of bandwidth (from BW average, MiB/s: perftest's MsgRate has a resolution of 1 msg/s).
     */
    private double[] perftest(String mode, int size, int iters) throws Exception {
        String tool = "ib_send_" + mode;
        int port = perftestPort++;
        List<String> args = List.of(tool, "-R", "-p", Integer.toString(port), "-s", Integer.toString(size), "-n",
                Integer.toString(iters));
        Process srv = LabHost.b().start(args, Map.of(), null);
        StringBuilder serverOutput = new StringBuilder();
        Thread drain = drain(srv.getInputStream(), serverOutput);
        try {
            List<String> client = new ArrayList<>(args);
            client.add(server);
            String output = null;
            for (int attempt = 0; attempt < 60; attempt++) { // until the server on B listens
                Process p = new ProcessBuilder(client).redirectErrorStream(true).start();
                String o = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                if (!p.waitFor(300, TimeUnit.SECONDS)) {
                    p.destroyForcibly();
                    throw new IllegalStateException(tool + " " + size + " B did not end within 300 s: " + o);
                }
                if (p.exitValue() == 0 && row(o, size) != null) {
                    output = o;
                    break;
                }
                if (!srv.isAlive()) {
                    throw new IllegalStateException(tool + "'s server on B ended: " + serverOutput + "; client: " + o);
                }
                Thread.sleep(500);
            }
            if (output == null) {
                throw new IllegalStateException(tool + " " + size + " B never connected to its server on B: "
                        + serverOutput);
            }
            append("perftest-client.out", "== " + String.join(" ", client) + "\n" + output);
            String[] f = row(output, size);
            if (mode.equals("lat")) { // bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9
                return new double[] {d(f[4]), d(f[7]), d(f[2]), 1e6 / (2 * d(f[4])), 0};
            }
            return new double[] {0, 0, 0, d(f[3]) * (1 << 20) / size, 0}; // bytes iters peak average msgrate
        } finally {
            if (!srv.waitFor(30, TimeUnit.SECONDS)) {
                srv.destroyForcibly();
            }
            drain.join(5_000);
            append("perftest-server.out", "== " + String.join(" ", args) + " (host B)\n" + serverOutput);
        }
    }

    private static Thread drain(InputStream in, StringBuilder into) {
        Thread t = new Thread(() -> {
            try (in) {
                String s = new String(in.readAllBytes(), StandardCharsets.UTF_8);
                synchronized (into) {
                    into.append(s);
                }
            } catch (IOException ignored) {
                // the process went away
            }
        }, "perftest-server-output");
        t.setDaemon(true);
        t.start();
        return t;
    }

    /** perftest's result row: the first line whose first field is the size and which has at least 5 fields. */
    private static String[] row(String output, int size) {
        for (String line : output.split("\n")) {
            String[] f = line.trim().split("\\s+");
            if (f.length >= 5 && f[0].equals(Integer.toString(size)) && f[1].matches("\\d+")) {
                return f;
            }
        }
        return null;
    }

    private static double d(String s) {
        return Double.parseDouble(s);
    }

    /** One transport client run here against the RdmaPerf server on B: {p50, p99, min, msg/s, jit_ms}. */
    private double[] transport(String mode, int size, int iters, boolean keep) throws Exception {
        String w = warmup.isEmpty() ? Integer.toString(iters) : warmup;
        try (JavaProcess client = JavaProcess.java("rdmaperf-client").jvm(PERF_JVM).keepOutput()
                .start("dev.artemisrdma.tools.RdmaPerf", "client", "--connect", server, "--port",
                        Integer.toString(PERF_PORT), "--mode", mode, "--size", Integer.toString(size), "--iters",
                        Integer.toString(iters), "--layer", "transport", "--warmup", w, "--settle", "0")) {
            if (!client.awaitExit(600)) {
                throw new IllegalStateException("RdmaPerf client did not end within 600 s: " + client.output());
            }
            String output = client.output();
            append("rdmaperf-client.out", output + "\n");
            Matcher m = RESULT.matcher(output);
            if (!m.find()) {
                throw new IllegalStateException("RdmaPerf client printed no RESULT: " + output);
            }
            Matcher min = MIN.matcher(output);
            Matcher jit = JIT.matcher(output);
            return new double[] {d(m.group(2)), d(m.group(3)), min.find() ? d(min.group(1)) : Double.NaN,
                d(m.group(4)), jit.find() ? d(jit.group(1)) : -1};
        }
    }

    private void append(String file, String text) throws IOException {
        Files.writeString(out.resolve(file), text, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    }

    // ------------------------------------------------------------------------------------ JMS

    /**
     * artemis-bench's broker on B and its workload here: per size and transport, all-out for
     * THROUGHPUT_SECONDS (msg/s), then RATE msg/s for LATENCY_SECONDS (send-to-receive p50/p99), one non-persistent
     * pair; a short all-out warm-up per transport first.
     */
    private String jms(List<String> transports) throws Exception {
        List<Integer> jmsSizes = words("JMS_SIZES", "1024 65536").stream().map(s -> positive("JMS_SIZES", s))
                .toList();
        int jmsRounds = positive("JMS_ROUNDS", env("JMS_ROUNDS", "1"));
        double throughputSeconds = Double.parseDouble(env("THROUGHPUT_SECONDS", "5"));
        int rate = positive("RATE", env("RATE", "50"));
        // above 4 KiB a tenth of RATE... for twice as long: 50 msg/s of 64 KiB was near the all-out rate (53 msg/s)
        int largeRate = positive("LARGE_RATE", env("LARGE_RATE", "10"));
        double latencySeconds = Double.parseDouble(env("LATENCY_SECONDS", "10"));
        ArtemisTransportBenchmark.Scenario scenario = new ArtemisTransportBenchmark.Scenario(false, 1);
        Map<String, List<double[]>> jmsFigures = new LinkedHashMap<>();
        WireCounters a0;
        WireCounters b0;
        try (JavaProcess broker = JavaProcess.driven("wire-jms-broker", BenchBrokerMain.class).on(LabHost.b())
                .jvm("-Xmx1g", "-XX:TieredStopAtLevel=1").start(server, "61700", "61616", "")) {
            broker.await("READY", 300);
            ArtemisTransportBenchmark.CpuMeter meter = new ArtemisTransportBenchmark.CpuMeter(broker);
            a0 = LabHost.a().counters();
            b0 = LabHost.b().counters();
            try (ActiveMQConnectionFactory tcp = new ActiveMQConnectionFactory("tcp://" + server + ":61616");
                 ActiveMQConnectionFactory rdma = RdmaConnectionFactories.create("rdma://" + server + ":61700");
                 jakarta.jms.Connection tcpKeeper = tcp.createConnection();
                 jakarta.jms.Connection rdmaKeeper = rdma.createConnection()) {
                for (String t : transports) { // the JIT of both JVMs on the path, once per transport
                    ArtemisTransportBenchmark.AllOut w = ArtemisTransportBenchmark.throughput(factory(t, tcp, rdma),
                            "warmup." + t, scenario, 4, meter, 1024);
                    System.out.printf(Locale.ROOT, "JMS warm-up %s: %.0f msg/s%n", t, w.messagesPerSecond());
                }
                for (int round = 1; round <= jmsRounds; round++) {
                    for (int size : jmsSizes) {
                        for (String t : transports) {
                            ActiveMQConnectionFactory cf = factory(t, tcp, rdma);
                            String queue = "wire." + t + "." + size + "." + round;
                            ArtemisTransportBenchmark.AllOut a = ArtemisTransportBenchmark.throughput(cf, queue,
                                    scenario, throughputSeconds, meter, size);
                            double[] cpu = new double[1];
                            boolean large = size > 4096;
                            Histogram h = ArtemisTransportBenchmark.fixedRate(cf, queue + ".lat", scenario,
                                    large ? largeRate : rate, large ? 2 * latencySeconds : latencySeconds, cpu, meter,
                                    size);
                            double[] f = {a.messagesPerSecond(), h.getValueAtPercentile(50) / 1000.0,
                                h.getValueAtPercentile(99) / 1000.0, a.cpuMicrosPerMessage()};
                            jmsFigures.computeIfAbsent(t + " " + size, k -> new ArrayList<>()).add(f);
                            String line = String.format(Locale.ROOT, "JMS round %d %6d B %-4s: %.0f msg/s (%.0f us "
                                    + "CPU a message, both JVMs), @%d msg/s p50 %.0f us p99 %.0f us (%d samples)%n",
                                    round, size, t, f[0], f[3], large ? largeRate : rate, f[1], f[2],
                                    h.getTotalCount());
                            System.out.print(line);
                            roundsLog.append(line);
                        }
                    }
                }
            }
        }
        WireCounters a = LabHost.a().counters().since(a0);
        WireCounters b = LabHost.b().counters().since(b0);
        StringBuilder t = new StringBuilder();
        t.append(String.format(Locale.ROOT, "JMS across the wire: broker on B (artemis-bench's, C1), one non-persistent "
                + "producer/consumer pair on A (C1); all-out %.0f s, then %d msg/s for %.0f s (above 4 KiB %d msg/s "
                + "for %.0f s) for the latency (send-to-receive, both on A's clock); %s%n", throughputSeconds, rate,
                latencySeconds, largeRate, 2 * latencySeconds,
                jmsRounds == 1 ? "one round" : "medians of " + jmsRounds + " rounds"));
        t.append(String.format(Locale.ROOT, "%-7s %-5s | %12s | %10s | %10s | %14s%n", "size", "", "all-out", "p50",
                "p99", "CPU a message"));
        for (int size : jmsSizes) {
            for (String tr : transports) {
                List<double[]> rows = jmsFigures.get(tr + " " + size);
                double[] m = new double[4];
                for (int c = 0; c < 4; c++) {
                    int col = c;
                    List<Double> v = new ArrayList<>(rows.stream().map(r -> r[col]).toList());
                    v.sort(Double::compare);
                    int n = v.size();
                    m[c] = n % 2 == 1 ? v.get(n / 2) : (v.get(n / 2 - 1) + v.get(n / 2)) / 2;
                }
                t.append(String.format(Locale.ROOT, "%-7d %-5s | %6.0f msg/s | %7.0f us | %7.0f us | %11.0f us%n", size,
                        tr, m[0], m[1], m[2], m[3]));
            }
        }
        if (transports.contains("rdma") && transports.contains("tcp")) {
            t.append("RDMA / TCP:");
            for (int size : jmsSizes) {
                double[] r = jmsFigures.get("rdma " + size).get(0);
                double[] c = jmsFigures.get("tcp " + size).get(0);
                t.append(String.format(Locale.ROOT, " %d B: rate %.2fx, p50 %.2fx, p99 %.2fx;", size, r[0] / c[0],
                        r[1] / c[1], r[2] / c[2]));
            }
            t.append(" (first round)\n");
        }
        // B's traffic in this part is all JMS to and from A (RDMA and TCP): its rxe must have crossed the NIC
        if (transports.contains("rdma")) {
            b.requireRoceCrossedTheWire(1_000);
        }
        t.append("crossing: ").append(a.summary()).append("; ").append(b.summary()).append('\n');
        return t.toString();
    }

    private static ActiveMQConnectionFactory factory(String transport, ActiveMQConnectionFactory tcp,
                                                     ActiveMQConnectionFactory rdma) {
        return switch (transport) {
            case "tcp" -> tcp;
            case "rdma" -> rdma;
            default -> throw new IllegalArgumentException("JMS takes rdma and/or tcp (or -), got '" + transport + "'");
        };
    }
}
