package dev.artemisrdma.it.bench.scale;

import dev.artemisrdma.it.RxeHwCounters;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.RdmaResources;
import dev.artemisrdma.transport.config.TransportConfig;

/**
 * The scale benchmark (run by {@code it-tests/bench/scale-bench} in the lab): one broker in its own JVM with an
 * RDMA acceptor ({@code ACCEPTOR_PARAMS}), N JMS connections over RDMA from a few client JVMs, each sending and
 * receiving as it opens, then a round in which every connection sends and receives at once, then all idle. Prints
 * rxe's RNR counters, the broker's registered memory (its own counters) against what per-connection receive queues
 * need, the broker's CPU over a window with every connection idle (from /proc), its busiest threads, and whether
 * {@code rdma resource show} returned to its baseline once everything closed. The same window before the first
 * connection is the floor (the JVM and Artemis with nothing to serve): what the idle connections add is the difference,
 * with the JIT compiler threads, whose compiling ends, left out of both.
 *
 * <p>Then, unless {@code TRANSPORTS} leaves out {@code tcp}, the same connections, round and idle window over Artemis's
 * own Netty TCP acceptor of the same broker: what Artemis itself costs with that many idle connections (its pings,
 * its connection checks), measured in the same boot, the baseline for the idle figure.
 *
 * <p>Arguments: [connections (1000)] [client JVMs (4)] [messages per connection in the round (10)]. Environment:
 * {@code ACCEPTOR_PARAMS}, {@code CLIENT_PARAMS} (key=value;...), {@code IDLE_SECONDS} (30), {@code SETTLE_SECONDS}
 * (20, after start-up before the empty broker's window, and between the round and the idle window), {@code TRANSPORTS} ("rdma tcp"), {@code BASELINE_CLASSES} (a class
 * folder put first on the broker's class path for a second RDMA pass, e.g. the connector as built before a change:
 * all passes run in this boot, this build first; each pass prints as it ends).
 */
public final class ScaleBenchmark {

    private static final Path INFINIBAND = Path.of("/sys/class/infiniband");

    private ScaleBenchmark() {
    }

    /** One pass: {@code idle} is the window with every connection idle, {@code empty} the one before any. */
    record Pass(String name, boolean tcp, int connections, double connectSeconds, String round, Map<String, Long> brokerIdle,
                Map<String, Long> brokerAfterRound, CpuWindow idle, CpuWindow empty, double loopCpuMBeanPercent,
                long wakeUps, long spins, long blocks) {

        /** What the idle connections add to the empty broker, leaving out the JIT compiler threads in both. */
        double addedWithoutJit() {
            return (idle.percent - idle.jitPercent()) - (empty.percent - empty.jitPercent());
        }
    }

    /**
     * The broker's CPU over a window (from /proc): the whole process, its JIT compiler threads (still compiling after
     * start-up or a round, work that ends), the completion loops, and the busiest threads.
     */
    record CpuWindow(double percent, double loopPercent, List<String> busiest, double seconds,
                     Map<Owner, Double> byOwner) {

        static CpuWindow measure(long pid, int seconds) throws Exception {
            Map<Long, long[]> threads0 = threadTicks(pid);
            long ticks0 = processTicks(pid);
            long t0 = System.nanoTime();
            Thread.sleep(seconds * 1000L);
            long ticks1 = processTicks(pid);
            double elapsed = (System.nanoTime() - t0) / 1e9;
            Map<Long, long[]> threads1 = threadTicks(pid);
            double hz = clockTicks();
            Map<Long, Double> byThread = threadPercents(threads0, threads1, hz, elapsed);
            return new CpuWindow((ticks1 - ticks0) / hz / elapsed * 100,
                    threadsPercent(byThread, "rdma-\\d+-.*-cq\\d*"), ScaleBenchmark.busiest(byThread), elapsed,
                    Owner.split(byThread));
        }

        /** The JIT compiler threads' share (the kernel cuts their names to "C2 CompilerThre"). */
        double jitPercent() {
            return byOwner.getOrDefault(Owner.JIT, 0.0);
        }

        /** What one owner's threads used in this window beyond {@code before}'s, in % of one core. */
        double addedBy(Owner owner, CpuWindow before) {
            return byOwner.getOrDefault(owner, 0.0) - before.byOwner.getOrDefault(owner, 0.0);
        }
    }

    /**
     * Whose threads used the CPU, by the thread names /proc gives (cut to 15 characters): so the idle figure can say
     * how much of what the connections add is the transport's own work and how much is Artemis's per-connection
     * work (its TTL check every connection-ttl-check-interval, which hands one flush task per connection to its
     * pool), the same whatever the transport.
     */
    enum Owner {
        /** Our transport: completion loops, its timer, rdma_cm's event thread (all named rdma-...). */
        TRANSPORT("transport (rdma-*)"),
        /** Artemis's threads: its pools ("Thread-N (ActiveMQ-..."), the failure check; Netty's event loops too. */
        ARTEMIS("Artemis and Netty"),
        /** The JIT compilers, whose compiling ends (left out of the idle figure). */
        JIT("JIT compilers"),
        /** The JVM's own threads: GC, the VM thread, the periodic task, ... */
        JVM("JVM"),
        OTHER("other");

        final String label;

        Owner(String label) {
            this.label = label;
        }

        static Owner of(String thread) {
            if (thread.startsWith("rdma-")) {
                return TRANSPORT;
            }
            if (thread.matches("C\\d CompilerThre.*")) {
                return JIT;
            }
            if (thread.matches("Thread-\\d+ \\(.*") || thread.toLowerCase(Locale.ROOT).startsWith("activemq")) {
                return ARTEMIS;
            }
            if (thread.startsWith("VM ") || thread.startsWith("G1 ") || thread.startsWith("GC Thread")
                    || thread.matches("(Service Thread|Monitor Deflati|Common-Cleaner|Signal Dispatch|Reference Handl"
                    + "|Finalizer|Notification Th|Sweeper thread|Attach Listener|Periodic GC).*")) {
                return JVM;
            }
            return OTHER;
        }

        static Map<Owner, Double> split(Map<Long, Double> byThread) {
            Map<Owner, Double> result = new EnumMap<>(Owner.class);
            byThread.forEach((tid, percent) -> result.merge(of(threadNames.getOrDefault(tid, "?")), percent,
                    Double::sum));
            return result;
        }
    }

    /** What the idle connections add to the empty broker, by whose threads use it (% of one core). */
    private static void addedByOwnerLine(StringBuilder out, Pass p) {
        StringBuilder parts = new StringBuilder();
        for (Owner owner : Owner.values()) {
            if (owner != Owner.JIT) {
                parts.append(String.format(Locale.ROOT, "%s%s %.2f", parts.length() == 0 ? "" : ", ", owner.label,
                        p.idle.addedBy(owner, p.empty)));
            }
        }
        line(out, "what the %d idle connections add, by whose threads (%% of one core, the idle window minus the empty "
                + "one, JIT left out): %s", p.connections, parts);
    }

    public static void main(String[] args) throws Exception {
        int connections = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
        int jvms = args.length > 1 ? Integer.parseInt(args[1]) : 4;
        int roundMessages = args.length > 2 ? Integer.parseInt(args[2]) : 10;
        String acceptorParams = System.getenv().getOrDefault("ACCEPTOR_PARAMS", "");
        String clientParams = System.getenv().getOrDefault("CLIENT_PARAMS", "");
        int idleSeconds = Integer.parseInt(System.getenv().getOrDefault("IDLE_SECONDS", "30"));
        int settleSeconds = Integer.parseInt(System.getenv().getOrDefault("SETTLE_SECONDS", "20"));
        List<String> transports = List.of(System.getenv().getOrDefault("TRANSPORTS", "rdma tcp").trim().split("\\s+"));
        String baseline = System.getenv().getOrDefault("BASELINE_CLASSES", "");
        String host = System.getenv().getOrDefault("RDMA_LAB_ADDR0", "10.77.0.1");

        Map<String, Long> countersBefore = rxeCounters();
        RdmaResources resourcesBefore = RdmaResources.now();
        List<Pass> passes = new ArrayList<>();
        List<String> failures = new ArrayList<>();
        List<String[]> variants = new ArrayList<>();
        if (transports.contains("rdma")) {
            variants.add(new String[] {"RDMA, this build", null, "rdma"});
            if (!baseline.isEmpty()) {
                variants.add(new String[] {"RDMA, baseline (" + baseline + ")", baseline, "rdma"});
            }
        }
        if (transports.contains("tcp")) {
            variants.add(new String[] {"Netty TCP (Artemis's own acceptor, same broker build)", null, "tcp"});
        }
        StringBuilder out = new StringBuilder();
        line(out, "");
        line(out, "scale-bench: %d RDMA JMS connections from %d client JVMs to one broker JVM; acceptor params '%s', "
                + "client params '%s'", connections, jvms, acceptorParams, clientParams);
        TransportConfig acceptor = transportConfig(acceptorParams);
        long perConnectionNeed = (long) connections * acceptor.receiveSlots() * acceptor.slotSize();
        int port = 61900;
        for (String[] v : variants) {
            boolean tcp = v[2].equals("tcp");
            Pass p = pass(v[0], tcp, v[1], host, port++, connections, jvms, roundMessages, acceptorParams,
                    clientParams, idleSeconds, settleSeconds);
            passes.add(p);
            line(out, "-- %s", p.name);
            line(out, "connected:        %d connections in %.1f s, each sent and received a 1 KiB message; round: %s",
                    p.connections, p.connectSeconds, p.round);
            Map<String, Long> s = p.brokerIdle;
            if (tcp) {
                line(out, "broker CPU, %.0f s with all %d connections idle: %.2f %% of one core (Artemis's pings and "
                        + "checks, Netty's event loops)", p.idle.seconds(), p.connections, p.idle.percent());
                line(out, "busiest broker threads in that window (CPU %% of one core): %s",
                        String.join(", ", p.idle.busiest()));
                emptyBrokerLine(out, p);
                addedByOwnerLine(out, p);
                if (s.get("serverConnections") != connections) {
                    failures.add(p.name + ": the broker counted " + s.get("serverConnections") + " connections, not "
                            + connections);
                }
                continue;
            }
            line(out, "broker counters:  connections %d, accepted %d, refused %d, rnrRetryErrors %d, completionErrors %d,"
                    + " creditStalls %d, credits given back to recalling pools %d (-1: a build without recalls)",
                    s.get("connections"), s.get("accepted"), s.get("refused"), s.get("rnrRetryErrors"),
                    s.get("completionErrors"), s.get("creditStalls"), s.get("creditsRecalled"));
            line(out, "registered memory of the broker: connections %.1f MiB (receives: %d shared pools, %.1f MiB; the "
                    + "rest send headers) + send pool %.1f MiB; per-connection receive queues need %d x %d slots x %d B "
                    + "= %.1f MiB (%.0f KiB per connection registered)", mib(s.get("registeredBytes")),
                    s.get("sharedPools"), mib(s.get("sharedPoolBytes")), mib(s.get("sendPoolBytes")), connections,
                    acceptor.receiveSlots(), acceptor.slotSize(), mib(perConnectionNeed),
                    s.get("registeredBytes") / 1024.0 / Math.max(1, s.get("connections")));
            line(out, "broker CPU, %.0f s with all %d connections idle: %.2f %% of one core; completion loop threads "
                    + "%.2f %% (/proc; LoopCpuNanos says %.2f %%; %d loops; %.1f wake-ups/s, %.1f spins/s, %.1f "
                    + "blocks/s; -1: a build without loop statistics)", p.idle.seconds(), p.connections,
                    p.idle.percent(), p.idle.loopPercent(), p.loopCpuMBeanPercent, s.get("loops"),
                    p.wakeUps / p.idle.seconds(), p.spins / p.idle.seconds(), p.blocks / p.idle.seconds());
            line(out, "busiest broker threads in that window (CPU %% of one core): %s",
                    String.join(", ", p.idle.busiest()));
            emptyBrokerLine(out, p);
            addedByOwnerLine(out, p);
            if (s.get("connections") != connections) {
                failures.add(p.name + ": the broker counted " + s.get("connections") + " connections, not "
                        + connections);
            }
            if (s.get("rnrRetryErrors") != 0 || s.get("completionErrors") != 0) {
                failures.add(p.name + ": completion errors at the broker: " + s);
            }
        }
        Pass rdmaPass = passes.stream().filter(x -> !x.tcp).findFirst().orElse(null);
        Pass tcpPass = passes.stream().filter(x -> x.tcp).findFirst().orElse(null);
        if (rdmaPass != null && tcpPass != null) {
            line(out, "idle broker CPU with %d connections: RDMA %.2f %%, Netty TCP %.2f %% of one core (RDMA/TCP %.2f)",
                    connections, rdmaPass.idle.percent(), tcpPass.idle.percent(),
                    rdmaPass.idle.percent() / Math.max(0.001, tcpPass.idle.percent()));
            line(out, "what the %d idle connections add to the empty broker, JIT threads left out: RDMA %.2f %%, Netty "
                    + "TCP %.2f %% of one core", connections, rdmaPass.addedWithoutJit(), tcpPass.addedWithoutJit());
        }
        Map<String, Long> countersAfter = rxeCounters();
        RdmaResources resourcesAfter = RdmaResources.awaitEqual(resourcesBefore, 60_000);
        Map<String, Long> delta = new TreeMap<>();
        countersAfter.forEach((k, v) -> delta.put(k, v - countersBefore.getOrDefault(k, 0L)));
        StringBuilder rnr = new StringBuilder();
        long rnrTotal = 0;
        for (Map.Entry<String, Long> e : delta.entrySet()) {
            if (e.getKey().contains("rnr")) {
                rnr.append(rnr.length() == 0 ? "" : ", ").append(e.getKey()).append(' ').append(e.getValue());
                rnrTotal += e.getValue();
            }
        }
        line(out, "rxe hw_counters over the whole run (all devices): %s; sent_pkts %d, rcvd_pkts %d",
                rnr.length() == 0 ? "NO rnr COUNTERS FOUND" : rnr, delta.getOrDefault("sent_pkts", 0L),
                delta.getOrDefault("rcvd_pkts", 0L));
        if (rnr.length() == 0) {
            failures.add("rxe exposes no rnr counters under " + INFINIBAND);
        } else if (rnrTotal != 0) {
            failures.add("RNR counted by rxe: " + rnr);
        }
        boolean back = resourcesAfter.equals(resourcesBefore);
        line(out, "rdma resource show: before %s, after %s: %s", resourcesBefore.counts(), resourcesAfter.counts(),
                back ? "back to baseline" : "NOT back to baseline");
        if (!back) {
            failures.add("rdma resources not back to baseline");
        }
        line(out, failures.isEmpty() ? "scale-bench: PASSED" : "scale-bench: FAILED " + failures);
        String results = System.getenv("RDMA_LAB_RESULTS");
        if (results != null) {
            Files.writeString(Path.of(results, "scale-summary.txt"), out.toString());
        }
        System.out.flush();
        System.exit(failures.isEmpty() ? 0 : 1);
    }

    private static Pass pass(String name, boolean tcp, String classPrefix, String host, int port, int connections,
                             int jvms, int roundMessages, String acceptorParams, String clientParams,
                             int idleSeconds, int settleSeconds) throws Exception {
        System.out.println("scale-bench: pass '" + name + "': starting the broker");
        List<JavaProcess> clients = new ArrayList<>();
        int tcpPort = port + 100;
        List<String> brokerArgs = new ArrayList<>(List.of(host, Integer.toString(port), acceptorParams));
        if (tcp) {
            brokerArgs.add(Integer.toString(tcpPort));
        }
        try (JavaProcess broker = JavaProcess.driven("scale-broker-" + port, ScaleBrokerMain.class)
                .classPathFirst(classPrefix).jvm("-Xmx1g").start(brokerArgs)) {
            broker.await("READY", 300);
            Thread.sleep(settleSeconds * 1000L); // start-up's JIT and GC
            System.out.printf("scale-bench: measuring the broker's CPU for %d s before any connection%n", idleSeconds);
            CpuWindow empty = CpuWindow.measure(broker.pid(), idleSeconds);
            long start = System.nanoTime();
            String url = tcp ? "tcp://" + host + ":" + tcpPort
                    : "rdma://" + host + ":" + port + ScaleParams.query(clientParams);
            int left = connections;
            for (int j = 0; j < jvms; j++) {
                int count = left / (jvms - j);
                left -= count;
                clients.add(JavaProcess.driven("scale-client-" + port + "-" + j, ScaleClientMain.class)
                        .jvm("-Xmx384m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
                        .start(url, Integer.toString(count), "c" + j, "4"));
            }
            for (JavaProcess c : clients) {
                c.await("CONNECTED", 1800);
            }
            double connectSeconds = (System.nanoTime() - start) / 1e9;
            System.out.printf(Locale.ROOT, "scale-bench: %d connections open after %.1f s%n", connections,
                    connectSeconds);
            long roundStart = System.nanoTime();
            for (JavaProcess c : clients) {
                c.send("round " + roundMessages);
            }
            long roundMessagesTotal = 0;
            for (JavaProcess c : clients) {
                String r = c.await("ROUND", 1200);
                roundMessagesTotal += Long.parseLong(r.replaceAll(".*received=(\\d+).*", "$1"));
            }
            String round = String.format(Locale.ROOT, "%d messages of 1 KiB each way in %.1f s, all connections at "
                    + "once", roundMessagesTotal, (System.nanoTime() - roundStart) / 1e9);
            Map<String, Long> afterRound = stats(broker);
            Thread.sleep(settleSeconds * 1000L); // settle: the round's last acknowledgements, JIT, GC
            Map<String, Long> s0 = stats(broker);
            System.out.printf("scale-bench: measuring the broker's CPU for %d s, all idle%n", idleSeconds);
            CpuWindow idle = CpuWindow.measure(broker.pid(), idleSeconds);
            Map<String, Long> s1 = stats(broker);
            double loopCpuMBean = s1.get("loops") < 0 ? -1
                    : (s1.get("loopCpuNanos") - s0.get("loopCpuNanos")) / 1e9 / idle.seconds() * 100;
            for (JavaProcess c : clients) {
                c.send("close");
            }
            for (JavaProcess c : clients) {
                c.await("CLOSED", 600);
                c.awaitExitOrKill(60);
            }
            broker.send("exit");
            broker.await("STOPPED", 120);
            broker.awaitExitOrKill(60);
            return new Pass(name, tcp, connections, connectSeconds, round, s1, afterRound, idle, empty, loopCpuMBean,
                    s1.get("loopWakeUps") - s0.get("loopWakeUps"), s1.get("loopSpins") - s0.get("loopSpins"),
                    s1.get("loopBlocks") - s0.get("loopBlocks"));
        } finally {
            for (JavaProcess c : clients) {
                c.close();
            }
        }
    }

    /**
     * The floor under the idle figure: the same broker before its first connection (JVM, Artemis's own periodic work),
     * and what the connections add once the JIT threads, whose compiling ends, are left out of both windows.
     */
    private static void emptyBrokerLine(StringBuilder out, Pass p) {
        line(out, "broker CPU, %.0f s before any connection: %.2f %% of one core (JIT compiler threads %.2f %%; busiest: "
                + "%s); all %d idle: JIT compiler threads %.2f %%; the idle connections add %.2f %% of one core to the "
                + "empty broker, JIT threads left out", p.empty.seconds(), p.empty.percent(), p.empty.jitPercent(),
                String.join(", ", p.empty.busiest()), p.connections, p.idle.jitPercent(), p.addedWithoutJit());
    }

    private static Map<String, Long> stats(JavaProcess broker) throws Exception {
        broker.send("stats");
        Map<String, Long> values = new LinkedHashMap<>();
        for (String kv : broker.await("STATS", 60).substring(6).trim().split(" ")) {
            int eq = kv.indexOf('=');
            values.put(kv.substring(0, eq), Long.parseLong(kv.substring(eq + 1)));
        }
        return values;
    }

    /** The acceptor's transport settings, from its parameters (other keys left out). */
    private static TransportConfig transportConfig(String params) {
        Map<String, Object> transport = new HashMap<>();
        ScaleParams.parse(params).forEach((k, v) -> {
            if (TransportConfig.KEYS.contains(k)) {
                transport.put(k, v);
            }
        });
        return TransportConfig.fromMap(transport);
    }

    /** Every rxe hardware counter, summed over devices and ports. */
    static Map<String, Long> rxeCounters() throws IOException {
        return RxeHwCounters.now().values();
    }

    /** utime + stime of a process, in clock ticks. */
    static long processTicks(long pid) throws IOException {
        long[] t = ticks(Path.of("/proc", Long.toString(pid), "stat"));
        return t[0] + t[1];
    }

    /** tid -> {utime, stime} of each thread, with its name in {@link #threadNames}. */
    private static final Map<Long, String> threadNames = new HashMap<>();

    static Map<Long, long[]> threadTicks(long pid) throws IOException {
        Map<Long, long[]> result = new HashMap<>();
        try (Stream<Path> tasks = Files.list(Path.of("/proc", Long.toString(pid), "task"))) {
            for (Path task : tasks.toList()) {
                try {
                    String stat = Files.readString(task.resolve("stat"));
                    long tid = Long.parseLong(task.getFileName().toString());
                    threadNames.put(tid, stat.substring(stat.indexOf('(') + 1, stat.lastIndexOf(')')));
                    result.put(tid, ticks(task.resolve("stat")));
                } catch (IOException ignored) {
                    // the thread ended meanwhile
                }
            }
        }
        return result;
    }

    private static long[] ticks(Path stat) throws IOException {
        String s = Files.readString(stat);
        String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
        // after the name: state(3) ... utime is field 14, stime 15 (1-based), i.e. index 11 and 12 here
        return new long[] {Long.parseLong(f[11]), Long.parseLong(f[12])};
    }

    /**
     * Each thread alive at the window's end: its CPU over the window (utime + stime since {@code before}, all of it
     * for a thread that began inside the window), in % of one core.
     */
    private static Map<Long, Double> threadPercents(Map<Long, long[]> before, Map<Long, long[]> after, double hz,
                                                    double seconds) {
        Map<Long, Double> result = new HashMap<>();
        after.forEach((tid, t) -> {
            long[] b = before.getOrDefault(tid, new long[2]);
            result.put(tid, (t[0] + t[1] - b[0] - b[1]) / hz / seconds * 100);
        });
        return result;
    }

    private static List<String> busiest(Map<Long, Double> byThread) {
        List<Map.Entry<Long, Double>> sorted = new ArrayList<>(byThread.entrySet());
        sorted.sort(Map.Entry.<Long, Double>comparingByValue(Comparator.reverseOrder()));
        List<String> top = new ArrayList<>();
        for (Map.Entry<Long, Double> e : sorted.subList(0, Math.min(6, sorted.size()))) {
            top.add(String.format(Locale.ROOT, "%s %.2f", threadNames.getOrDefault(e.getKey(), "?"), e.getValue()));
        }
        top.add(String.format(Locale.ROOT, "(%d threads)", byThread.size()));
        return top;
    }

    /**
     * CPU of the threads whose names match {@code name} (the kernel cuts names to 15 characters: completion loops are
     * TRANSPORT-DEVICE-cqN).
     */
    private static double threadsPercent(Map<Long, Double> byThread, String name) {
        double percent = 0;
        for (Map.Entry<Long, Double> e : byThread.entrySet()) {
            if (threadNames.getOrDefault(e.getKey(), "").matches(name)) {
                percent += e.getValue();
            }
        }
        return percent;
    }

    private static double clockTicks() throws Exception {
        Process p = new ProcessBuilder("getconf", "CLK_TCK").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes()).strip();
        p.waitFor();
        return Double.parseDouble(out);
    }

    private static double mib(long bytes) {
        return bytes / 1024.0 / 1024.0;
    }

    private static void line(StringBuilder out, String format, Object... args) {
        String l = String.format(Locale.ROOT, format, args);
        System.out.println(l);
        out.append(l).append('\n');
    }
}
