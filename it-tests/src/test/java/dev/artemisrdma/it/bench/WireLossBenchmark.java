package dev.artemisrdma.it.bench;

import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.hosts.LabHost;
import dev.artemisrdma.it.hosts.WireCounters;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The transport across the two-host lab's wire under packet loss (issue 35): {@code RdmaPerf}'s server on host B,
 * its client on host A, 1 KiB request/reply (ping-pong: p50, p99, round trips a second) and a 1 KiB stream, on a
 * clean wire and with {@code tc netem} loss of 0.1 % and 1 % on both hosts' NICs (so both directions), in rounds that
 * take the conditions in turn within one boot. Each condition's figures are medians over the rounds, and its rxe
 * counters say what the loss cost (retries, sequence errors). Run by {@code it-tests/bench/wire-loss-bench}.
 *
 * <p>System properties: {@code rounds} (3), {@code latIters} (5,000), {@code bwIters} (50,000), {@code out} (the
 * results folder).
 */
public final class WireLossBenchmark {

    private static final Pattern RESULT = Pattern.compile("RESULT layer=\\S+ mode=(\\S+) size=\\d+ iters=\\d+ "
            + "p50_us=(\\S+) p99_us=(\\S+) msgs_per_s=(\\d+)");
    private static final String[] CONDITIONS = {"clean", "loss 0.1%", "loss 1%"};

    private WireLossBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        LabHost.requireTwoHosts();
        int rounds = Integer.getInteger("rounds", 3);
        int latIters = Integer.getInteger("latIters", 5_000);
        int bwIters = Integer.getInteger("bwIters", 50_000);
        Path out = Path.of(System.getProperty("out", JavaProcess.resultsDir().toString()));
        String server = LabHost.b().wireAddress();
        int port = 18600;
        Map<String, List<double[]>> lat = new LinkedHashMap<>();
        Map<String, List<Double>> bw = new LinkedHashMap<>();
        Map<String, WireCounters> cost = new LinkedHashMap<>();
        StringBuilder log = new StringBuilder();
        try (JavaProcess perfServer = JavaProcess.java("rdmaperf-server").on(LabHost.b()).jvm("-Xmx512m")
                .classPath(System.getProperty("java.class.path")).readyWhen("rdmaperf server", 180)
                .log(out.resolve("rdmaperf-server.log"), false)
                .start("dev.artemisrdma.tools.RdmaPerf", "server", "--bind", server, "--port",
                        Integer.toString(port))) {
            for (int round = 0; round <= rounds; round++) { // round 0 warms up and is not recorded
                for (String condition : CONDITIONS) {
                    netem(condition);
                    try {
                        WireCounters a0 = LabHost.a().counters();
                        WireCounters b0 = LabHost.b().counters();
                        double[] l = client(server, port, "lat", latIters, log);
                        double m = client(server, port, "bw", bwIters, log)[2];
                        WireCounters moved = LabHost.a().counters().since(a0);
                        WireCounters movedB = LabHost.b().counters().since(b0);
                        if (round > 0) {
                            lat.computeIfAbsent(condition, k -> new ArrayList<>()).add(l);
                            bw.computeIfAbsent(condition, k -> new ArrayList<>()).add(m);
                            cost.merge(condition, plus(moved, movedB), WireLossBenchmark::plus);
                        }
                        System.out.printf(Locale.ROOT, "round %d %-10s ping-pong p50 %.1f us p99 %.1f us, stream %.0f "
                                + "msg/s%n", round, condition, l[0], l[1], m);
                    } finally {
                        netem("clean");
                    }
                }
            }
        }
        StringBuilder table = new StringBuilder();
        table.append(String.format(Locale.ROOT, "%-10s %14s %14s %18s %16s %s%n", "wire", "p50 one-way", "p99",
                "round trips/s", "stream msg/s", "rxe repairs (both hosts, all rounds)"));
        double cleanP50 = median(lat.get("clean"), 0);
        double cleanBw = medianOf(bw.get("clean"));
        for (String condition : CONDITIONS) {
            double p50 = median(lat.get(condition), 0);
            double p99 = median(lat.get(condition), 1);
            double rate = median(lat.get(condition), 2);
            double stream = medianOf(bw.get(condition));
            WireCounters c = cost.get(condition);
            table.append(String.format(Locale.ROOT, "%-10s %8.1f us %-4s %11.1f us %12.0f %18.0f %-5s %s%n",
                    condition, p50, ratio(p50, cleanP50), p99, rate, stream, ratio(stream, cleanBw),
                    repairs(c)));
        }
        table.append(String.format(Locale.ROOT, "(1 KiB, transport layer; medians of %d rounds of %d round trips and "
                + "%d streamed messages per condition; ratios against the clean wire; netem on both NICs)%n", rounds,
                latIters, bwIters));
        System.out.print(table);
        Files.createDirectories(out);
        Files.writeString(out.resolve("wire-loss.txt"), table.toString());
        Files.writeString(out.resolve("wire-loss-rounds.txt"), log.toString());
    }

    private static void netem(String condition) throws Exception {
        String command = condition.equals("clean") ? "tc qdisc del dev " + LabHost.WIRE_NIC + " root 2>/dev/null; true"
                : "tc qdisc replace dev " + LabHost.WIRE_NIC + " root netem " + condition;
        LabHost.a().sh(command);
        LabHost.b().sh(command);
    }

    /** p50 and p99 one-way in microseconds, and messages a second. */
    private static double[] client(String server, int port, String mode, int iters, StringBuilder log)
            throws Exception {
        try (JavaProcess client = JavaProcess.java("rdmaperf-client").jvm("-Xmx512m")
                .classPath(System.getProperty("java.class.path")).keepOutput()
                .start("dev.artemisrdma.tools.RdmaPerf", "client", "--connect", server, "--port",
                        Integer.toString(port), "--mode", mode, "--size", "1024", "--iters", Integer.toString(iters),
                        "--layer", "transport", "--warmup", Integer.toString(iters / 5), "--settle", "0")) {
            if (!client.awaitExit(600)) {
                throw new IllegalStateException("RdmaPerf client did not end within 600 s: " + client.output());
            }
            String output = client.output();
            log.append(output);
            Matcher m = RESULT.matcher(output);
            if (!m.find()) {
                throw new IllegalStateException("RdmaPerf client printed no RESULT: " + output);
            }
            return new double[] {Double.parseDouble(m.group(2)), Double.parseDouble(m.group(3)),
                Double.parseDouble(m.group(4))};
        }
    }

    /** Both hosts' counters (or two rounds') added up, name by name. */
    private static WireCounters plus(WireCounters a, WireCounters b) {
        Map<String, Long> rxe = new LinkedHashMap<>(a.rxe());
        b.rxe().forEach((k, v) -> rxe.merge(k, v, Long::sum));
        Map<String, Long> nic = new LinkedHashMap<>(a.nic());
        b.nic().forEach((k, v) -> nic.merge(k, v, Long::sum));
        return new WireCounters("A+B", nic, rxe);
    }

    private static String repairs(WireCounters c) {
        return String.format(Locale.ROOT, "retries %d, seq errors %d, out-of-seq %d, duplicates %d, retry exceeded %d",
                c.rxe("completer_retry_err"), c.rxe("rcvd_seq_err"), c.rxe("out_of_seq_request"),
                c.rxe("duplicate_request"), c.rxe("retry_exceeded_err"));
    }

    private static String ratio(double value, double base) {
        return String.format(Locale.ROOT, "%.2fx", value / base);
    }

    private static double median(List<double[]> rows, int column) {
        return medianOf(rows.stream().map(r -> r[column]).toList());
    }

    private static double medianOf(List<Double> values) {
        List<Double> sorted = new ArrayList<>(values);
        sorted.sort(Double::compare);
        int n = sorted.size();
        return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
    }
}
