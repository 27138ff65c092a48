package dev.artemisrdma.it.bench;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.ToDoubleFunction;

import com.sun.management.OperatingSystemMXBean;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordingFile;

import dev.artemisrdma.transport.inmemory.MemoryFabric;
import dev.artemisrdma.tools.InProcessPerf;

/**
 * The transport's own latency on the host, where neither rxe's system call per post nor the lab's emulated CPU
 * stands in front of it: RdmaPerf's two layers, both ends in this JVM over {@link MemoryFabric}, in alternating
 * rounds: the bare verbs ping-pong (ib_send_lat's loop: post a SEND, busy-poll its answer) and the transport's
 * (framing, credits, the completion loop, the send ring). Same fabric, same copy per SEND, same process: their ratio is
 * what our protocol and its Java add to a round trip, the figure issue 24 asks of the lab's (p50 within 1.15x of
 * ib_send_lat at 64 B, 1.25x at 1 KiB), without the lab's amplification.
 *
 * <p>A flight recording (1 ms execution samples) splits each layer's windows by component: completion queue polls
 * (busy-polling for the peer's answer, mostly), the fabric's work (the SEND's copy, queues, completions), our
 * transport, the ping-pong driver. Each share is turned into microseconds of the process's CPU per round trip
 * (measured over the layer's runs): the sampler does not catch every running thread every period, so the samples give
 * shares, not time.
 *
 * <p>Knobs (environment): SIZES ("64 1024"), ROUNDS (5), ITERS (200000 round trips measured per run), WARMUP (ITERS / 2
 * before them, by count), JFR (1; 0: no recording), KEEP_JFR (0). Results in the folder named by the first argument.
 */
public final class TransportHostBenchmark {

    private static final String ADDRESS = "127.0.0.1";
    private static final int PORT = 19000;
    private static final Duration SAMPLE_PERIOD = Duration.ofMillis(1);
    private static final OperatingSystemMXBean CPU =
            (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    static final String POLLS = "completion queue polls (busy-polling for the answer, mostly)";
    static final String FABRIC = "fabric (in-memory): the SEND's copy, queues, completions";
    static final String OURS = "our transport";
    static final String DRIVER = "ping-pong driver (RdmaPerf's loops, HdrHistogram)";
    static final String JDK = "JDK only";
    private static final String TRANSPORT_PACKAGE = "dev.artemisrdma.transport.";
    /** The fabric API's data classes (Completions, SendList, RecvList): their caller's work. */
    private static final String FABRIC_API_PACKAGE = "dev.artemisrdma.transport.fabric.";

    /** One layer's run in one round: its figures and when it ran. */
    record Run(int size, int round, boolean transport, InProcessPerf.PingPong figures, long startMillis,
               long endMillis, long roundTrips, long cpuNanos) {
    }

    private TransportHostBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            throw new IllegalArgumentException("usage: TransportHostBenchmark RESULTS_DIR");
        }
        Path results = Path.of(args[0]);
        Files.createDirectories(results);
        List<Integer> sizes = new ArrayList<>();
        for (String s : BenchEnv.words("SIZES", "64 1024")) {
            sizes.add(BenchEnv.positive("SIZES", s));
        }
        int rounds = BenchEnv.positive("ROUNDS", BenchEnv.env("ROUNDS", "5"));
        int iters = BenchEnv.positive("ITERS", BenchEnv.env("ITERS", "200000"));
        int warmup = Integer.parseInt(BenchEnv.env("WARMUP", Integer.toString(iters / 2)));
        boolean jfr = !BenchEnv.env("JFR", "1").equals("0");
        PrintStream out = System.out;
        out.println("transport-host-bench: RdmaPerf's verbs and transport ping-pongs, both ends in one JVM over the "
                + "in-memory fabric; sizes " + sizes + ", " + rounds + " rounds of " + iters + " round trips after "
                + warmup + " by count (and before them one unrecorded round of each layer per size), layers "
                + "alternating in order round by round; one-way microseconds (half a round trip, as ib_send_lat)");
        out.println("the fabric: a SEND is a memcpy on the posting thread into the peer's posted receive, its "
                + "completions go on rings that the other side polls; no wire, no system call (a NIC adds 1-2 us a "
                + "hop, rxe a system call per post): both layers pay the same for it");

        List<Run> runs = new ArrayList<>();
        Path runLog = results.resolve("transport-host-runs.log");
        Recording recording = null;
        if (jfr) {
            recording = new Recording();
            recording.enable("jdk.ExecutionSample").withPeriod(SAMPLE_PERIOD);
            recording.start();
        }
        try (PrintStream log = new PrintStream(Files.newOutputStream(runLog), true, StandardCharsets.UTF_8);
             InProcessPerf perf = new InProcessPerf(new MemoryFabric(), ADDRESS, PORT)) {
            for (int size : sizes) {
                // round 0 runs both layers once, unrecorded: the JIT's first compilations of each layer's code at
                // this size fall there, not into the first round's figures and CPU
                for (int round = 0; round <= rounds; round++) {
                    // the order alternates, so neither layer always runs on the other's leftovers (a warm cache, GC)
                    boolean transportFirst = round % 2 == 0;
                    Run first = measure(perf, log, size, round, transportFirst, iters, warmup);
                    Run second = measure(perf, log, size, round, !transportFirst, iters, warmup);
                    Run verbs = transportFirst ? second : first;
                    Run transport = transportFirst ? first : second;
                    if (round == 0) {
                        continue;
                    }
                    runs.add(verbs);
                    runs.add(transport);
                    out.printf(Locale.ROOT, "%d B round %d: verbs p50 %.3f p99 %.3f us | transport p50 %.3f p99 "
                                    + "%.3f us | p50 %.2fx p99 %.2fx%n", size, round, verbs.figures().p50Micros(),
                            verbs.figures().p99Micros(), transport.figures().p50Micros(),
                            transport.figures().p99Micros(),
                            transport.figures().p50Micros() / verbs.figures().p50Micros(),
                            transport.figures().p99Micros() / verbs.figures().p99Micros());
                }
            }
        } finally {
            System.setOut(out);
        }
        Map<String, Profile> profiles = Map.of();
        if (recording != null) {
            recording.stop();
            Path file = results.resolve("transport-host.jfr");
            recording.dump(file);
            recording.close();
            profiles = Profile.read(file, runs);
            if (BenchEnv.env("KEEP_JFR", "0").equals("0")) {
                Files.delete(file);
            }
        }
        summarize(out, results, sizes, runs, profiles);
    }

    private static Run measure(InProcessPerf perf, PrintStream log, int size, int round, boolean transport,
                               int iters, int warmup) throws Exception {
        log.println("---- " + size + " B round " + round + " " + (transport ? "transport" : "verbs"));
        PrintStream out = System.out;
        System.setOut(log); // the layers' own report lines go to the run log
        try {
            long cpu = CPU.getProcessCpuTime();
            long start = System.currentTimeMillis();
            InProcessPerf.PingPong figures = perf.pingPong(transport, size, iters, warmup);
            long end = System.currentTimeMillis();
            return new Run(size, round, transport, figures, start, end, (long) iters + warmup,
                    CPU.getProcessCpuTime() - cpu);
        } finally {
            System.setOut(out);
        }
    }

    private static void summarize(PrintStream out, Path results, List<Integer> sizes, List<Run> runs,
                                  Map<String, Profile> profiles) throws IOException {
        StringBuilder csv = new StringBuilder("size,layer,p50_us,p99_us,min_us,rounds,p50_vs_verbs,p99_vs_verbs,"
                + "p50_vs_verbs_min,p50_vs_verbs_max\n");
        out.println();
        out.println("summary (medians of the rounds; ratios: median of the rounds' transport/verbs ratios, with their "
                + "range):");
        out.println(String.format(Locale.ROOT, "%-6s | %-24s | %-24s | %-26s | %s", "size", "verbs p50 / p99 us",
                "transport p50 / p99 us", "transport/verbs p50", "p99"));
        for (int size : sizes) {
            List<Run> verbs = runs.stream().filter(r -> r.size() == size && !r.transport()).toList();
            List<Run> transport = runs.stream().filter(r -> r.size() == size && r.transport()).toList();
            double[] p50Ratios = ratios(verbs, transport, InProcessPerf.PingPong::p50Micros);
            double[] p99Ratios = ratios(verbs, transport, InProcessPerf.PingPong::p99Micros);
            double vp50 = median(verbs, InProcessPerf.PingPong::p50Micros);
            double vp99 = median(verbs, InProcessPerf.PingPong::p99Micros);
            double tp50 = median(transport, InProcessPerf.PingPong::p50Micros);
            double tp99 = median(transport, InProcessPerf.PingPong::p99Micros);
            out.println(String.format(Locale.ROOT, "%-6s | %8.3f / %-13.3f | %8.3f / %-13.3f | %5.2fx (%.2f-%.2f)%8s | "
                            + "%.2fx", size + " B", vp50, vp99, tp50, tp99, ArtemisTransportBenchmark.median(p50Ratios),
                    min(p50Ratios), max(p50Ratios), "", ArtemisTransportBenchmark.median(p99Ratios)));
            csv.append(String.format(Locale.ROOT, "%d,verbs,%.3f,%.3f,%.3f,%d,,,,%n", size, vp50, vp99,
                    median(verbs, InProcessPerf.PingPong::minMicros), verbs.size()));
            csv.append(String.format(Locale.ROOT, "%d,transport,%.3f,%.3f,%.3f,%d,%.3f,%.3f,%.3f,%.3f%n", size, tp50,
                    tp99, median(transport, InProcessPerf.PingPong::minMicros), transport.size(),
                    ArtemisTransportBenchmark.median(p50Ratios), ArtemisTransportBenchmark.median(p99Ratios),
                    min(p50Ratios), max(p50Ratios)));
        }
        Files.writeString(results.resolve("transport-host-summary.csv"), csv);
        if (profiles.isEmpty()) {
            return;
        }
        StringBuilder profileCsv = new StringBuilder("size,layer,component,us_per_round_trip,share,samples\n");
        out.println();
        out.println("CPU per round trip, both ends (the process's CPU over each layer's recorded runs, their warm-up "
                + "counts included, over their round trips), split by the shares of its 1 ms execution samples:");
        for (int size : sizes) {
            for (boolean transport : new boolean[] {false, true}) {
                Profile p = profiles.get(Profile.key(size, transport));
                if (p == null) {
                    continue;
                }
                String layer = transport ? "transport" : "verbs";
                out.println(String.format(Locale.ROOT, "  %d B %s: %.3f us CPU per round trip, %d samples",
                        size, layer, p.cpuMicrosPerRoundTrip(), p.samples));
                for (Map.Entry<String, Long> e : p.sortedComponents()) {
                    out.println(String.format(Locale.ROOT, "    %6.3f us %5.1f %%  %s",
                            p.cpuMicros(e.getValue()), 100.0 * e.getValue() / p.samples, e.getKey()));
                    profileCsv.append(String.format(Locale.ROOT, "%d,%s,\"%s\",%.4f,%.4f,%d%n", size, layer,
                            e.getKey(), p.cpuMicros(e.getValue()), (double) e.getValue() / p.samples,
                            e.getValue()));
                }
                if (transport) {
                    out.println("    our methods (the first frame of ours from the top, with what they call):");
                    p.ourMethods().stream().limit(12).forEach(e -> out.println(String.format(Locale.ROOT,
                            "      %6.3f us  %s", p.cpuMicros(e.getValue()), e.getKey())));
                }
            }
        }
        Files.writeString(results.resolve("transport-host-profile.csv"), profileCsv);
    }

    private static double[] ratios(List<Run> verbs, List<Run> transport,
                                   ToDoubleFunction<InProcessPerf.PingPong> figure) {
        double[] r = new double[Math.min(verbs.size(), transport.size())];
        for (int i = 0; i < r.length; i++) {
            r[i] = figure.applyAsDouble(transport.get(i).figures()) / figure.applyAsDouble(verbs.get(i).figures());
        }
        return r;
    }

    private static double median(List<Run> runs, ToDoubleFunction<InProcessPerf.PingPong> figure) {
        return ArtemisTransportBenchmark.median(runs.stream().mapToDouble(r -> figure.applyAsDouble(r.figures()))
                .toArray());
    }

    private static double min(double[] values) {
        return Arrays.stream(values).min().orElse(Double.NaN);
    }

    private static double max(double[] values) {
        return Arrays.stream(values).max().orElse(Double.NaN);
    }

    /** One layer's samples at one size, over all its runs. */
    static final class Profile {
        final Map<String, Long> byComponent = new TreeMap<>();
        final Map<String, Long> byOurMethod = new TreeMap<>();
        long samples;
        long roundTrips;
        long cpuNanos;

        static String key(int size, boolean transport) {
            return size + (transport ? "-transport" : "-verbs");
        }

        static Map<String, Profile> read(Path jfr, List<Run> runs) throws IOException {
            Map<String, Profile> profiles = new LinkedHashMap<>();
            for (Run r : runs) {
                Profile p = profiles.computeIfAbsent(key(r.size(), r.transport()), k -> new Profile());
                p.roundTrips += r.roundTrips();
                p.cpuNanos += r.cpuNanos();
            }
            for (RecordedEvent e : RecordingFile.readAllEvents(jfr)) {
                if (!e.getEventType().getName().equals("jdk.ExecutionSample") || e.getStackTrace() == null
                        || e.getStackTrace().getFrames().isEmpty()) {
                    continue;
                }
                long at = e.getStartTime().toEpochMilli();
                for (Run r : runs) {
                    if (at >= r.startMillis() && at < r.endMillis()) {
                        profiles.get(key(r.size(), r.transport())).add(e.getStackTrace().getFrames());
                        break;
                    }
                }
            }
            return profiles;
        }

        void add(List<RecordedFrame> frames) {
            samples++;
            String component = component(frames);
            byComponent.merge(component, 1L, Long::sum);
            if (component.equals(OURS)) {
                for (RecordedFrame f : frames) {
                    String c = f.getMethod().getType().getName();
                    if (ours(c)) {
                        byOurMethod.merge(c.substring(c.lastIndexOf('.') + 1) + "." + f.getMethod().getName(), 1L,
                                Long::sum);
                        break;
                    }
                }
            }
        }

        /**
         * The component of the first frame from the top that is not the JDK's; the fabric API's data classes
         * (Completions, SendList, RecvList: filled by one side, read by the other) count for their caller.
         */
        static String component(List<RecordedFrame> frames) {
            for (RecordedFrame f : frames) {
                String c = f.getMethod().getType().getName();
                if (ArtemisHostBenchmark.Profile.jdkClass(c) || c.startsWith(FABRIC_API_PACKAGE)) {
                    continue;
                }
                if (c.startsWith(MemoryFabric.class.getPackageName() + ".")) { // the fabric's core and fast mode
                    return f.getMethod().getName().startsWith("poll") ? POLLS : FABRIC;
                }
                return ours(c) ? OURS : DRIVER;
            }
            return JDK;
        }

        /** Our transport's classes, the fabric API's data classes left out (their caller's work). */
        private static boolean ours(String className) {
            return className.startsWith(TRANSPORT_PACKAGE) && !className.startsWith(FABRIC_API_PACKAGE);
        }

        /** Both ends' CPU per round trip: the process's, measured, not sampled. */
        double cpuMicrosPerRoundTrip() {
            return roundTrips == 0 ? Double.NaN : cpuNanos / 1000.0 / roundTrips;
        }

        /** The part of {@link #cpuMicrosPerRoundTrip} that {@code n} of the samples stand for. */
        double cpuMicros(long n) {
            return samples == 0 ? Double.NaN : cpuMicrosPerRoundTrip() * n / samples;
        }

        List<Map.Entry<String, Long>> sortedComponents() {
            return largestFirst(byComponent);
        }

        List<Map.Entry<String, Long>> ourMethods() {
            return largestFirst(byOurMethod);
        }

        private static List<Map.Entry<String, Long>> largestFirst(Map<String, Long> counts) {
            List<Map.Entry<String, Long>> e = new ArrayList<>(counts.entrySet());
            e.sort(Map.Entry.<String, Long>comparingByValue().reversed());
            return e;
        }
    }
}
