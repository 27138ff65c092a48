package dev.artemisrdma.it.bench;

import static dev.artemisrdma.it.bench.BenchEnv.env;
import static dev.artemisrdma.it.bench.BenchEnv.positive;
import static dev.artemisrdma.it.bench.BenchEnv.words;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.artemis.RdmaRuntime;
import dev.artemisrdma.it.artemis.LabBroker;
import dev.artemisrdma.it.bench.ArtemisTransportBenchmark.AllOut;
import dev.artemisrdma.it.bench.ArtemisTransportBenchmark.CpuMeter;
import dev.artemisrdma.it.bench.ArtemisTransportBenchmark.Scenario;
import dev.artemisrdma.transport.inmemory.MemoryFabric;
import dev.artemisrdma.it.bench.fabric.MemoryFabricSupplier;
import dev.artemisrdma.transport.loop.CompletionLoop;
import jakarta.jms.Connection;
import jdk.jfr.Configuration;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordedStackTrace;
import jdk.jfr.consumer.RecordingFile;
import org.HdrHistogram.Histogram;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.config.FileDeploymentManager;
import org.apache.activemq.artemis.core.config.impl.FileConfiguration;
import org.apache.activemq.artemis.core.remoting.impl.invm.InVMAcceptorFactory;
import org.apache.activemq.artemis.core.remoting.impl.netty.NettyAcceptorFactory;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.impl.ActiveMQServerImpl;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.spi.core.security.ActiveMQJAASSecurityManager;

import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.ToDoubleFunction;

/**
 * JMS against the floor, on the host: one broker and its clients in one JVM, no lab, the same JMS workload over three
 * transports of that broker in alternating rounds: Artemis's in-VM transport (the floor: no wire at all), our RDMA
 * transport over the in-memory {@link MemoryFabric} (what it models and what not: its comment, and the output's
 * header), and Netty TCP over loopback. 1 KiB messages, non-persistent and persistent, 1 and 16 producer/consumer
 * pairs; per round and transport: throughput all-out (and the process's CPU per message), then latency at a fixed
 * total rate (send to receive, HdrHistogram). Figures are medians of the rounds; ours/in-VM and ours/Netty ratios are
 * taken round by round (the three transports of one round ran back to back, in an order that rotates each round).
 *
 * <p>A flight recording (JFR) of the measured rounds splits each transport's CPU per message by component: Java
 * execution samples of the all-out phases, each given to the first frame from the top that is not the JDK's (the
 * fabric API's data classes are skipped to their caller), scaled to the Java threads' user CPU; the kernel's part of
 * those threads' CPU (system calls) and the process's CPU outside Java threads (GC, JIT, VM) are rows of their own.
 *
 * <p>Knobs (environment): {@code DELIVERY} ("nonpersistent persistent"), {@code PAIRS} ("1 16"), {@code ROUNDS} (5),
 * {@code TRANSPORTS} ("invm rdma tcp"), {@code THROUGHPUT_SECONDS} (3), {@code RATE} (1000 msg/s in all), {@code PERSISTENT_RATE} (200), {@code
 * LATENCY_SECONDS} (2), {@code WARMUP_SECONDS} (45, then on until the JIT settled), {@code ACCEPTOR_PARAMS} (transport keys for the RDMA acceptor,
 * {@code key=value;key=value}), {@code JFR} (1; 0 records nothing), {@code JOURNAL_DIR} (/dev/shm when there is
 * one); results into the folder given as the only argument.
 */
public final class ArtemisHostBenchmark {

    static final String[] ALL = {"invm", "rdma", "tcp"};
    private static final String HOST = "127.0.0.1";
    private static final int RDMA_PORT = 61700;
    private static final int TCP_PORT = 61616;
    private static final double[] PERCENTILES = {50, 90, 99, 99.9};
    private static final double WARMUP_PHASE_SECONDS = 2;

    static String label(String transport) {
        return switch (transport) {
            case "invm" -> "in-VM";
            case "rdma" -> "RDMA (mem)";
            case "tcp" -> "Netty TCP";
            default -> transport;
        };
    }

    static final String FABRIC_NOTE = """
            The RDMA transport runs over MemoryFabric, an in-memory fabric (dev.artemisrdma.transport.inmemory):
              models: a SEND executes inside postSend on the posting thread: each scatter-gather entry is resolved by
                lkey and bounds-checked (as a NIC's memory translation) and copied straight into the peer's oldest
                posted receive (own or shared receive queue); the receive completion (with immediate data) goes to
                the peer's completion queue, the send completion (if signaled) to the sender's; completion queues
                are rings whose empty poll reads one volatile field; notification wakes a parked loop as the
                completion channel does; per-queue-pair order, length and protection errors, RNR waits (counted),
                flush on disconnect; rdma_cm set-up on a thread of its own.
              not modelled: the NIC itself: its DMA is a memcpy on the posting CPU thread (its CPU is counted here,
                a NIC's would be free) and there is no wire latency (a NIC adds about 1-2 us a hop); no queue depth
                limits (ENOMEM), RNR delay or retry limits, SRQ limit events, device removal or async events; no
                system call anywhere on the data path (as a real NIC's user-space verbs; rxe makes each post one).
              Not FakeFabric (the unit tests'): it takes one fabric-wide lock for every post, poll and wait, allocates
                and copies each SEND twice and hands it to a wire thread (an extra wake-up per message), and checks
                verbs rules per operation: a correctness tool, not a cost model.""";

    record Settings(List<Boolean> deliveries, List<Integer> pairs, int rounds, List<String> transports,
                    double throughputSeconds, int rate, int persistentRate, double latencySeconds,
                    int warmupSeconds, boolean jfr, Map<String, String> acceptorParams) {

        /** The latency phase's rate: persistent sends wait for the journal, whose NIO buffer syncs every 3.3 ms. */
        int rate(Scenario s) {
            return s.persistent() ? persistentRate : rate;
        }

        List<Scenario> scenarios() {
            return Scenario.every(deliveries, pairs);
        }

        static Settings fromEnvironment() {
            List<Boolean> deliveries = BenchEnv.deliveries(); // the record's accessor shadows a static import
            List<Integer> pairs = BenchEnv.pairs();
            List<String> transports = new ArrayList<>();
            for (String t : words("TRANSPORTS", "invm rdma tcp")) {
                if (!Arrays.asList(ALL).contains(t)) {
                    throw new IllegalArgumentException("TRANSPORTS takes invm, rdma and tcp, got '" + t + "'");
                }
                transports.add(t);
            }
            Map<String, String> params = new LinkedHashMap<>();
            for (String kv : env("ACCEPTOR_PARAMS", "").split(";")) {
                if (!kv.isBlank()) {
                    String[] p = kv.split("=", 2);
                    if (p.length != 2) {
                        throw new IllegalArgumentException("ACCEPTOR_PARAMS takes key=value;key=value, got '" + kv
                                + "'");
                    }
                    params.put(p[0].trim(), p[1].trim());
                }
            }
            return new Settings(deliveries, pairs, positive("ROUNDS", env("ROUNDS", "5")), transports,
                    Double.parseDouble(env("THROUGHPUT_SECONDS", "3")), positive("RATE", env("RATE", "1000")),
                    positive("PERSISTENT_RATE", env("PERSISTENT_RATE", "200")),
                    Double.parseDouble(env("LATENCY_SECONDS", "2")),
                    Integer.parseInt(env("WARMUP_SECONDS", "45")), !env("JFR", "1").equals("0"), params);
        }

    }

    /** One round of one scenario over one transport. */
    record Figures(String transport, Scenario scenario, int round, double messagesPerSecond,
                   double cpuMicrosPerMessage, ThreadCpu.Usage threads, long messages, Histogram latency,
                   double cpuPercentAtRate, long throughputStart, long throughputEnd, long fabricSends,
                   ArtemisTransportBenchmark.ClientCounters counters) {

        double percentileMicros(double p) {
            return latency.getValueAtPercentile(p) / 1000.0;
        }
    }

    private ArtemisHostBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        Settings settings;
        try {
            settings = Settings.fromEnvironment();
        } catch (IllegalArgumentException e) {
            System.err.println("artemis-host-bench: " + e.getMessage());
            System.exit(2);
            return;
        }
        Path out = Path.of(args.length > 0 ? args[0] : ".");
        Files.createDirectories(out);
        System.setProperty(RdmaRuntime.FABRIC_PROPERTY, MemoryFabricSupplier.class.getName());
        Path data = dataDir();
        System.out.println("artemis-host-bench: one JVM (" + Runtime.getRuntime().availableProcessors()
                + " CPUs), one broker (persistence on, NIO journal in " + data + "), " + settings.rounds
                + " rounds of " + settings.transports + " (order rotating), " + settings.throughputSeconds
                + " s all-out, " + settings.rate + " msg/s (persistent: " + settings.persistentRate + ") for "
                + settings.latencySeconds + " s; RDMA acceptor "
                + "params " + settings.acceptorParams + "; JVM " + System.getProperty("java.vm.version") + " "
                + java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments());
        System.out.println(FABRIC_NOTE);
        List<Figures> results = new ArrayList<>();
        Recording recording = null;
        Path jfrFile = out.resolve("artemis-host.jfr");
        ActiveMQServer server = startBroker(data, settings.acceptorParams);
        CpuMeter meter = new CpuMeter(null);
        Map<String, ActiveMQConnectionFactory> factories = new LinkedHashMap<>();
        try {
            factories.put("invm", new ActiveMQConnectionFactory("vm://0"));
            factories.put("rdma", RdmaConnectionFactories.create("rdma://" + HOST + ":" + RDMA_PORT));
            factories.put("tcp", new ActiveMQConnectionFactory("tcp://" + HOST + ":" + TCP_PORT));
            List<Connection> keepers = new ArrayList<>();
            for (String t : settings.transports) {
                keepers.add(factories.get(t).createConnection()); // one idle connection each, as long-lived clients
            }
            warmUp(factories, settings, meter);
            if (settings.jfr) {
                recording = new Recording(Configuration.getConfiguration("profile"));
                recording.enable("jdk.ExecutionSample").withPeriod(Duration.ofMillis(1));
                recording.setToDisk(true);
                recording.start();
            }
            for (Scenario scenario : settings.scenarios()) {
                for (int round = 0; round < settings.rounds; round++) {
                    int n = settings.transports.size();
                    for (int k = 0; k < n; k++) {
                        String name = settings.transports.get((k + round) % n); // each transport first in turn
                        results.add(measure(factories.get(name), name, scenario, round, settings, meter));
                    }
                }
            }
            if (recording != null) {
                recording.stop();
                recording.dump(jfrFile);
            }
            for (Connection c : keepers) {
                c.close();
            }
        } finally {
            for (ActiveMQConnectionFactory cf : factories.values()) {
                cf.close();
            }
            server.stop();
            deleteTree(data);
        }
        MemoryFabric fabric = MemoryFabric.last();
        Map<String, Profile> profiles = recording != null ? Profile.read(jfrFile, results) : Map.of();
        List<Comparison> comparisons = new ArrayList<>();
        for (Scenario s : settings.scenarios()) {
            Comparison c = new Comparison(s, settings.transports, results);
            comparisons.add(c);
            print(c, settings, profiles);
        }
        printSummary(comparisons, settings);
        if (fabric != null) {
            System.out.printf(Locale.ROOT, "%nMemoryFabric: %d SENDs, %d bytes copied, %d RNR waits (SENDs that found no "
                    + "receive posted)%n", fabric.sends(), fabric.bytesCopied(), fabric.rnrWaits());
        }
        write(out, comparisons, settings, profiles);
        System.exit(0);
    }

    private static Path dataDir() throws IOException {
        String configured = System.getenv("JOURNAL_DIR");
        Path parent = configured != null && !configured.isBlank() ? Path.of(configured)
                : Files.isDirectory(Path.of("/dev/shm")) && Files.isWritable(Path.of("/dev/shm")) ? Path.of("/dev/shm")
                : Path.of(System.getProperty("java.io.tmpdir"));
        Files.createDirectories(parent);
        return Files.createTempDirectory(parent, "artemis-host-bench-");
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (var walk = Files.walk(dir)) {
            for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }

    /**
     * config/broker.xml as users configure it (the plugin makes its "rdma" acceptor ours, here on 127.0.0.1 over the
     * in-memory fabric), with an in-VM acceptor (serverId 0) and a Netty TCP acceptor on 127.0.0.1 added.
     */
    static ActiveMQServer startBroker(Path dataDir, Map<String, String> rdmaParams) throws Exception {
        System.setProperty("rdma.host", HOST);
        System.setProperty("rdma.port", Integer.toString(RDMA_PORT));
        try {
            FileDeploymentManager deployment = new FileDeploymentManager(LabBroker.configDir().resolve("broker.xml")
                    .toUri().toString());
            FileConfiguration config = new FileConfiguration();
            deployment.addDeployable(config);
            deployment.readConfiguration();
            LabBroker.writable(config, dataDir, true);
            if (!rdmaParams.isEmpty()) {
                TransportConfiguration rdma = config.getAcceptorConfigurations().stream()
                        .filter(a -> "rdma".equals(a.getName())).findFirst().orElseThrow();
                config.getAcceptorConfigurations().remove(rdma);
                Map<String, Object> params = new HashMap<>(rdma.getParams());
                params.putAll(rdmaParams);
                config.addAcceptorConfiguration(new TransportConfiguration(rdma.getFactoryClassName(), params,
                        "rdma"));
            }
            config.addAcceptorConfiguration(new TransportConfiguration(InVMAcceptorFactory.class.getName(),
                    Map.of("serverId", 0), "invm"));
            config.addAcceptorConfiguration(new TransportConfiguration(NettyAcceptorFactory.class.getName(),
                    Map.of("host", HOST, "port", TCP_PORT, "protocols", "CORE"), "tcp"));
            ActiveMQServer server = new ActiveMQServerImpl(config, new ActiveMQJAASSecurityManager());
            server.start();
            if (!server.isActive()) {
                throw new IllegalStateException("broker did not become active");
            }
            return server;
        } finally {
            System.clearProperty("rdma.host");
            System.clearProperty("rdma.port");
        }
    }

    private static Figures measure(ActiveMQConnectionFactory cf, String name, Scenario scenario, int round,
                                   Settings settings, CpuMeter meter) throws Exception {
        String queue = "host." + scenario.delivery() + scenario.pairs() + "." + name + round;
        MemoryFabric fabric = MemoryFabric.last();
        long sendsBefore = fabric == null ? 0 : fabric.sends();
        ArtemisTransportBenchmark.ClientCounters before = ArtemisTransportBenchmark.ClientCounters.read(HOST);
        AllOut a = ArtemisTransportBenchmark.throughput(cf, queue, scenario, settings.throughputSeconds, meter);
        ArtemisTransportBenchmark.ClientCounters counters = ArtemisTransportBenchmark.ClientCounters.read(HOST)
                .minus(before);
        long sends = fabric == null ? 0 : fabric.sends() - sendsBefore;
        double[] cpu = new double[1];
        Histogram h = ArtemisTransportBenchmark.fixedRate(cf, queue + ".lat", scenario, settings.rate(scenario),
                settings.latencySeconds, cpu, meter);
        System.out.printf(Locale.ROOT, "%s %s round %d: %.0f msg/s, %.1f us CPU/msg, JIT %d ms; @%d/s p50 %.1f us, "
                        + "p99 %.1f us, CPU %.0f %% of a core%n", scenario.label(), label(name), round,
                a.messagesPerSecond(), a.cpuMicrosPerMessage(), a.threads().jitMillis(), settings.rate(scenario),
                h.getValueAtPercentile(50) / 1000.0, h.getValueAtPercentile(99) / 1000.0, cpu[0]);
        return new Figures(name, scenario, round, a.messagesPerSecond(), a.cpuMicrosPerMessage(), a.threads(),
                a.messages(), h, cpu[0], a.startMillis(), a.endMillis(), sends, counters);
    }

    /**
     * All-out phases of every scenario over every transport, until the JIT has settled: at least WARMUP_SECONDS and
     * every scenario once, then until one scenario's phases (every transport) spent at most {@value #SETTLED_JIT_SHARE}
     * of their time compiling; {@code WARMUP_BOUND_SECONDS} (150) s at most. (A run on a host busy with other work compiled
     * for seconds in each round after a fixed 45 s, and its first rounds read 3-10x below its last.)
     */
    private static void warmUp(Map<String, ActiveMQConnectionFactory> factories, Settings settings, CpuMeter meter)
            throws Exception {
        List<Scenario> scenarios = settings.scenarios();
        long start = System.nanoTime();
        for (int i = 0; ; i++) {
            Scenario scenario = scenarios.get(i % scenarios.size());
            StringBuilder line = new StringBuilder();
            long jit = 0;
            long passStart = System.nanoTime();
            for (String t : settings.transports) {
                AllOut a = ArtemisTransportBenchmark.throughput(factories.get(t), "warmup" + i + t, scenario,
                        WARMUP_PHASE_SECONDS, meter);
                jit += a.threads().jitMillis();
                line.append(line.length() == 0 ? "" : ", ").append(label(t)).append(' ')
                        .append(Math.round(a.messagesPerSecond()));
            }
            double share = jit / ((System.nanoTime() - passStart) / 1e6);
            double elapsed = (System.nanoTime() - start) / 1e9;
            System.out.printf(Locale.ROOT, "warm-up %d (%s): %s msg/s, JIT compiling %.0f %% of the time%n", i,
                    scenario.label(), line, 100 * share);
            if (i + 1 >= scenarios.size() && elapsed >= settings.warmupSeconds && share <= SETTLED_JIT_SHARE) {
                System.out.printf(Locale.ROOT, "warm-up: the JIT settled after %.0f s%n", elapsed);
                return;
            }
            if (i + 1 >= scenarios.size() && elapsed >= Math.max(settings.warmupSeconds, WARMUP_BOUND_SECONDS)) {
                System.out.printf(Locale.ROOT, "warm-up: %d s passed before the JIT settled; measuring anyway (JIT per "
                        + "round in the lines below)%n", Math.max(settings.warmupSeconds, WARMUP_BOUND_SECONDS));
                return;
            }
        }
    }

    private static final double SETTLED_JIT_SHARE = 0.03;
    /** WARMUP_BOUND_SECONDS in the environment, else 150. */
    private static final int WARMUP_BOUND_SECONDS = Integer.parseInt(System.getenv().getOrDefault(
            "WARMUP_BOUND_SECONDS", "150"));

    // ---------------------------------------------------------------- profile

    /** Execution samples of one scenario's all-out phases over one transport, by component and by hot method. */
    static final class Profile {
        final Map<String, Long> byComponent = new TreeMap<>();
        final Map<String, Long> byMethod = new HashMap<>();
        /** Samples by the first frame of ours (dev.artemisrdma) from the top: our methods with what they call. */
        final Map<String, Long> byOurMethod = new HashMap<>();
        long samples;

        static String key(Scenario s, String transport) {
            return s.delivery() + "-" + s.pairs() + "-" + transport;
        }

        static Map<String, Profile> read(Path jfr, List<Figures> results) throws IOException {
            Map<String, Profile> profiles = new HashMap<>();
            List<Figures> phases = new ArrayList<>(results);
            phases.sort(Comparator.comparingLong(Figures::throughputStart));
            for (RecordedEvent e : RecordingFile.readAllEvents(jfr)) {
                if (!e.getEventType().getName().equals("jdk.ExecutionSample")) {
                    continue;
                }
                long at = e.getStartTime().toEpochMilli();
                Figures phase = null;
                for (Figures f : phases) {
                    if (at >= f.throughputStart && at < f.throughputEnd) {
                        phase = f;
                        break;
                    }
                }
                RecordedStackTrace stack = e.getStackTrace();
                if (phase == null || stack == null || stack.getFrames().isEmpty()) {
                    continue;
                }
                Profile p = profiles.computeIfAbsent(key(phase.scenario, phase.transport), k -> new Profile());
                p.samples++;
                String component = component(stack.getFrames());
                p.byComponent.merge(component, 1L, Long::sum);
                boolean mine = (component.contains("our ") || component.startsWith("fabric")) && component != SPIN;
                for (RecordedFrame f : mine ? stack.getFrames() : List.<RecordedFrame>of()) {
                    String c = f.getMethod().getType().getName();
                    if (c.startsWith("dev.artemisrdma.") && !c.startsWith("dev.artemisrdma.it.bench.Artemis")) {
                        p.byOurMethod.merge(c + "." + f.getMethod().getName() + ":" + f.getLineNumber(), 1L,
                                Long::sum);
                        break;
                    }
                }
                RecordedFrame top = stack.getFrames().get(0);
                p.byMethod.merge(top.getMethod().getType().getName() + "." + top.getMethod().getName(), 1L,
                        Long::sum);
            }
            return profiles;
        }

        /**
         * The component of the first frame from the top that is not the JDK's (fabric API data classes skipped); Netty
         * is named with the first component under it that called it (Artemis's buffers are Netty's, and so are
         * some of ours).
         */
        static String component(List<RecordedFrame> frames) {
            for (RecordedFrame f : frames) {
                // by the class itself, not its name as a string: the package split moved it (from
                // dev.artemisrdma.transport to .loop) and a string left behind matched nothing since
                if (f.getMethod().getName().equals("spin")
                        && f.getMethod().getType().getName().equals(CompletionLoop.class.getName())) {
                    return SPIN; // the busy-poll a spin window buys (with verbs: ibv_poll_cq in a loop)
                }
            }
            String netty = null;
            for (RecordedFrame f : frames) {
                String c = f.getMethod().getType().getName();
                if (jdkClass(c)) {
                    continue;
                }
                if (c.startsWith("dev.artemisrdma.transport.fabric.")) {
                    continue; // Completions, SendList, RecvList: filled and read by both sides; their caller counts
                }
                String component = componentOf(c);
                if (component.equals("Netty")) {
                    netty = component;
                    continue;
                }
                return netty == null ? component : "Netty, called by " + component;
            }
            return netty != null ? "Netty" : "JDK";
        }

        /** Whether {@code className} is the JDK's: a profile gives its time to the first caller that is not. */
        static boolean jdkClass(String className) {
            return className.startsWith("java.") || className.startsWith("javax.") || className.startsWith("jdk.")
                    || className.startsWith("sun.") || className.startsWith("com.sun.");
        }

        /** The in-memory fabric's package (connector test classes): its core and its fast mode, MemoryFabric. */
        static final String IN_MEMORY_FABRIC = MemoryFabric.class.getPackageName() + ".";

        static String componentOf(String c) {
            if (c.startsWith("dev.artemisrdma.it.bench.fabric.") || c.startsWith(IN_MEMORY_FABRIC)) {
                return "fabric (in-memory)";
            }
            if (c.startsWith("dev.artemisrdma.transport.")) {
                return "our transport";
            }
            if (c.startsWith("dev.artemisrdma.artemis.")) {
                return "our Artemis adapter";
            }
            if (c.startsWith("dev.artemisrdma.")) {
                return "benchmark";
            }
            if (c.startsWith("io.netty.")) {
                return "Netty";
            }
            if (c.startsWith("org.apache.activemq.artemis.")) {
                String a = c.substring("org.apache.activemq.artemis.".length());
                if (a.startsWith("core.client.") || a.startsWith("jms.client.")) {
                    return "Artemis client";
                }
                if (a.startsWith("core.journal.") || a.startsWith("core.io.") || a.startsWith("core.persistence.")) {
                    return "Artemis journal";
                }
                if (a.startsWith("core.remoting.") || a.startsWith("core.protocol.") || a.startsWith("spi.")) {
                    return "Artemis remoting/protocol";
                }
                if (a.startsWith("core.server.") || a.startsWith("core.postoffice.") || a.startsWith("core.paging.")
                        || a.startsWith("core.transaction.")) {
                    return "Artemis broker";
                }
                return "Artemis other (utils, messages, buffers)";
            }
            return "other libraries";
        }

        List<Map.Entry<String, Long>> hottest(int n) {
            List<Map.Entry<String, Long>> e = new ArrayList<>(byMethod.entrySet());
            e.sort(Map.Entry.<String, Long>comparingByValue().reversed());
            return e.subList(0, Math.min(n, e.size()));
        }
    }

    static final String KERNEL = "kernel (system calls of Java threads)";
    static final String SPIN = "our transport: loops busy-polling";
    static final String VM = "GC, JIT, VM threads (not sampled)";

    /**
     * CPU microseconds per message by component over all rounds' all-out phases of one scenario and transport: the
     * Java threads' user CPU split by the samples, the kernel's part and the VM's rows apart.
     */
    static Map<String, Double> split(Comparison c, String transport, Map<String, Profile> profiles) {
        List<Figures> rounds = c.rounds(transport);
        ThreadCpu.Usage usage = ThreadCpu.Usage.sum(rounds.stream().map(Figures::threads).toList());
        double messages = rounds.stream().mapToLong(Figures::messages).sum();
        long kernel = usage.kernelByGroup().values().stream().mapToLong(Long::longValue).sum();
        long java = usage.attributed();
        Map<String, Double> split = new LinkedHashMap<>();
        Profile p = profiles.get(Profile.key(c.scenario, transport));
        double user = Math.max(0, java - kernel) / 1000.0 / messages;
        if (p == null || p.samples == 0) {
            split.put("Java threads (no profile)", user);
        } else {
            List<Map.Entry<String, Long>> e = new ArrayList<>(p.byComponent.entrySet());
            e.sort(Map.Entry.<String, Long>comparingByValue().reversed());
            for (Map.Entry<String, Long> x : e) {
                split.put(x.getKey(), user * x.getValue() / p.samples);
            }
        }
        split.put(KERNEL, kernel / 1000.0 / messages);
        split.put(VM, Math.max(0, usage.processNanos() - java) / 1000.0 / messages);
        return split;
    }

    // ---------------------------------------------------------------- reporting

    /** The rounds of one scenario over every transport. */
    record Comparison(Scenario scenario, List<String> transports, List<Figures> all) {

        List<Figures> rounds(String transport) {
            List<Figures> r = new ArrayList<>();
            for (Figures f : all) {
                if (f.scenario.equals(scenario) && f.transport.equals(transport)) {
                    r.add(f);
                }
            }
            r.sort(Comparator.comparingInt(Figures::round));
            return r;
        }

        double[] values(String transport, ToDoubleFunction<Figures> figure) {
            return rounds(transport).stream().mapToDouble(figure).toArray();
        }

        double median(String transport, ToDoubleFunction<Figures> figure) {
            return ArtemisTransportBenchmark.median(values(transport, figure));
        }

        /** {@code a}'s figure of each round over {@code b}'s of the same round. */
        double[] ratios(String a, String b, ToDoubleFunction<Figures> figure) {
            List<Figures> x = rounds(a);
            List<Figures> y = rounds(b);
            int n = Math.min(x.size(), y.size());
            double[] r = new double[n];
            for (int i = 0; i < n; i++) {
                double d = figure.applyAsDouble(y.get(i));
                r[i] = d == 0 ? 0 : figure.applyAsDouble(x.get(i)) / d;
            }
            return r;
        }

        boolean has(String transport) {
            return transports.contains(transport) && !rounds(transport).isEmpty();
        }

        Figures medianLatencyRound(String transport) {
            List<Figures> sorted = new ArrayList<>(rounds(transport));
            sorted.sort(Comparator.comparingDouble(f -> f.percentileMicros(50)));
            return sorted.get((sorted.size() - 1) / 2);
        }
    }

    private static String spread(double[] values, String format) {
        if (values.length == 0) {
            return "-";
        }
        double[] s = values.clone();
        Arrays.sort(s);
        String median = String.format(Locale.ROOT, format, ArtemisTransportBenchmark.median(s));
        if (s.length < 2) {
            return median;
        }
        return median + " (" + String.format(Locale.ROOT, format, s[0]) + ".."
                + String.format(Locale.ROOT, format, s[s.length - 1]) + ")";
    }

    private static void print(Comparison c, Settings settings, Map<String, Profile> profiles) {
        System.out.println();
        System.out.printf(Locale.ROOT, "Host, one JVM: 1 KiB JMS messages, %s; median of %d rounds (lowest..highest); "
                + "ratios taken round by round%n", c.scenario.label(), settings.rounds);
        StringBuilder head = new StringBuilder(String.format(Locale.ROOT, "%-26s", ""));
        for (String t : c.transports) {
            head.append(String.format(Locale.ROOT, " %24s", label(t)));
        }
        boolean ratios = c.has("rdma") && (c.has("invm") || c.has("tcp"));
        if (ratios) {
            head.append(String.format(Locale.ROOT, " %19s %19s", "RDMA/in-VM", "RDMA/TCP"));
        }
        System.out.println(head);
        row(c, ratios, "throughput, msg/s", Figures::messagesPerSecond, "%.0f");
        row(c, ratios, "CPU per message, us", Figures::cpuMicrosPerMessage, "%.1f");
        for (double p : PERCENTILES) {
            row(c, ratios, "latency " + ArtemisTransportBenchmark.percentileName(p) + ", us", f -> f.percentileMicros(p),
                    "%.1f");
        }
        row(c, ratios, "latency max, us", f -> f.latency.getMaxValue() / 1000.0, "%.0f");
        row(c, ratios, "CPU @" + settings.rate(c.scenario) + "/s, % core", Figures::cpuPercentAtRate, "%.1f");
        if (c.has("rdma")) {
            row(c, false, "fabric SENDs per message", f -> f.messages == 0 ? 0 : (double) f.fabricSends / f.messages,
                    "%.2f");
        }
        if (c.has("rdma")) {
            List<Figures> r = c.rounds("rdma");
            ArtemisTransportBenchmark.ClientCounters k = ArtemisTransportBenchmark.ClientCounters.sum(
                    r.stream().map(Figures::counters).toList());
            double n = r.stream().mapToLong(Figures::messages).sum();
            System.out.printf(Locale.ROOT, "RDMA transport (the JVM's, broker and clients), all-out, per message: "
                    + "%.2f frames sent, %.2f received, %.2f completions, %.3f credit stalls; loops: %.3f wake-ups, "
                    + "%.3f blocks, %.3f spins (%.0f %% caught a completion), %.1f us loop CPU%n", k.framesSent() / n,
                    k.framesReceived() / n, k.completions() / n, k.creditStalls() / n, k.wakeUps() / n,
                    k.blocks() / n, k.spins() / n, k.spins() == 0 ? 0 : 100.0 * k.spinHits() / k.spins(),
                    k.loopCpuNanos() / 1000.0 / n);
        }
        System.out.printf(Locale.ROOT, "(throughput: %s s all-out; latency: send to receive at %d msg/s in all; CPU: "
                + "the whole process, broker and clients)%n", settings.throughputSeconds, settings.rate(c.scenario));
        for (String t : c.transports) {
            List<Figures> r = c.rounds(t);
            ThreadCpu.Usage usage = ThreadCpu.Usage.sum(r.stream().map(Figures::threads).toList());
            double n = r.stream().mapToLong(Figures::messages).sum();
            StringBuilder line = new StringBuilder();
            for (Map.Entry<String, Long> e : usage.top(6)) {
                line.append(String.format(Locale.ROOT, "%s%.1f %s", line.length() == 0 ? "" : ", ",
                        e.getValue() / 1000.0 / n, e.getKey()));
            }
            System.out.printf(Locale.ROOT, "  busiest threads, all-out, %s (us per message): %s%n", label(t), line);
        }
        if (!profiles.isEmpty()) {
            System.out.println("  CPU per message by component, all-out, all rounds (us; JFR execution samples "
                    + "scaled to the Java threads' user CPU):");
            Map<String, Map<String, Double>> splits = new LinkedHashMap<>();
            List<String> components = new ArrayList<>();
            for (String t : c.transports) {
                Map<String, Double> s = split(c, t, profiles);
                splits.put(t, s);
                s.keySet().forEach(k -> {
                    if (!components.contains(k)) {
                        components.add(k);
                    }
                });
            }
            for (String comp : components) {
                StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "    %-42s", comp));
                for (String t : c.transports) {
                    line.append(String.format(Locale.ROOT, " %10.2f", splits.get(t).getOrDefault(comp, 0.0)));
                }
                System.out.println(line);
            }
            StringBuilder names = new StringBuilder(String.format(Locale.ROOT, "    %-42s", "(columns)"));
            for (String t : c.transports) {
                names.append(String.format(Locale.ROOT, " %10s", t));
            }
            System.out.println(names);
        }
    }

    private static void row(Comparison c, boolean ratios, String label, ToDoubleFunction<Figures> figure,
                            String format) {
        StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "%-26s", label));
        for (String t : c.transports) {
            line.append(String.format(Locale.ROOT, " %24s", spread(c.values(t, figure), format)));
        }
        if (ratios) {
            line.append(String.format(Locale.ROOT, " %19s %19s",
                    c.has("invm") ? spread(c.ratios("rdma", "invm", figure), "%.2f") : "-",
                    c.has("tcp") ? spread(c.ratios("rdma", "tcp", figure), "%.2f") : "-"));
        }
        System.out.println(line);
    }

    /** The issue's targets (issue 24), non-persistent; persistent reported beside. */
    private static void printSummary(List<Comparison> comparisons, Settings settings) {
        System.out.println();
        System.out.println("Ours (RDMA over the in-memory fabric) against the floor (in-VM) and Netty TCP: median of "
                + "the rounds' ratios (lowest..highest); latency @" + settings.rate + " msg/s (persistent @"
                + settings.persistentRate + ")");
        System.out.printf(Locale.ROOT, "%-26s %18s %18s %18s %18s %18s %18s%n", "scenario", "thr /in-VM", "thr /TCP",
                "p50 /in-VM", "p50 /TCP", "CPU/msg /in-VM", "p99 /in-VM");
        for (Comparison c : comparisons) {
            if (!c.has("rdma")) {
                continue;
            }
            System.out.printf(Locale.ROOT, "%-26s %18s %18s %18s %18s %18s %18s%n", c.scenario.label(),
                    spread(c.ratios("rdma", "invm", Figures::messagesPerSecond), "%.2f"),
                    spread(c.ratios("rdma", "tcp", Figures::messagesPerSecond), "%.2f"),
                    spread(c.ratios("rdma", "invm", f -> f.percentileMicros(50)), "%.2f"),
                    spread(c.ratios("rdma", "tcp", f -> f.percentileMicros(50)), "%.2f"),
                    spread(c.ratios("rdma", "invm", Figures::cpuMicrosPerMessage), "%.2f"),
                    spread(c.ratios("rdma", "invm", f -> f.percentileMicros(99)), "%.2f"));
        }
        System.out.println();
        System.out.println("issue 24 targets, non-persistent (throughput >= 0.95x in-VM and >= 1.5x TCP; p50 <= 1.1x "
                + "in-VM and <= 0.5x TCP; CPU per message <= 1.05x in-VM), median of the rounds' ratios:");
        for (Comparison c : comparisons) {
            if (c.scenario.persistent() || !c.has("rdma") || !c.has("invm") || !c.has("tcp")) {
                continue;
            }
            System.out.printf(Locale.ROOT, "  %-24s throughput %s, %s; p50 %s, %s; CPU/msg %s%n", c.scenario.label(),
                    target(c.ratios("rdma", "invm", Figures::messagesPerSecond), 0.95, true),
                    target(c.ratios("rdma", "tcp", Figures::messagesPerSecond), 1.5, true),
                    target(c.ratios("rdma", "invm", f -> f.percentileMicros(50)), 1.1, false),
                    target(c.ratios("rdma", "tcp", f -> f.percentileMicros(50)), 0.5, false),
                    target(c.ratios("rdma", "invm", Figures::cpuMicrosPerMessage), 1.05, false));
        }
    }

    private static String target(double[] ratios, double bound, boolean atLeast) {
        double m = ArtemisTransportBenchmark.median(ratios);
        boolean holds = atLeast ? m >= bound : m <= bound;
        boolean every = Arrays.stream(ratios).allMatch(r -> atLeast ? r >= bound : r <= bound);
        return String.format(Locale.ROOT, "%.2f %s %.2f %s", m, atLeast ? ">=" : "<=", bound,
                holds ? (every ? "holds (every round)" : "holds (median)") : "MISSES");
    }

    private static void write(Path out, List<Comparison> comparisons, Settings settings,
                              Map<String, Profile> profiles) throws IOException {
        Files.writeString(out.resolve(Charts.MEASURED_ON), LocalDate.now(ZoneOffset.UTC) + "\n");
        Files.writeString(out.resolve("artemis-host-fabric.txt"), FABRIC_NOTE + "\n");
        try (PrintWriter csv = new PrintWriter(Files.newBufferedWriter(out.resolve(Charts.ARTEMIS_HOST_SUMMARY)));
             PrintWriter rounds = new PrintWriter(Files.newBufferedWriter(out.resolve("artemis-host-rounds.csv")));
             PrintWriter prof = new PrintWriter(Files.newBufferedWriter(out.resolve("artemis-host-profile.csv")));
             PrintWriter hot = new PrintWriter(Files.newBufferedWriter(out.resolve("artemis-host-hot-methods.txt")))) {
            csv.println("delivery,pairs,transport,msgs_per_s,cpu_us_per_msg,p50_us,p90_us,p99_us,p999_us,max_us,rate,"
                    + "cpu_pct_at_rate,rounds,msgs_per_s_min,msgs_per_s_max,p50_us_min,p50_us_max,"
                    + "thr_vs_invm,thr_vs_tcp,p50_vs_invm,p50_vs_tcp,cpu_vs_invm,cpu_vs_tcp");
            rounds.println("delivery,pairs,transport,round,msgs_per_s,cpu_us_per_msg,p50_us,p90_us,p99_us,p999_us,"
                    + "max_us,rate,cpu_pct_at_rate,fabric_sends_per_msg,start_epoch_ms,end_epoch_ms");
            prof.println("delivery,pairs,transport,component,cpu_us_per_msg,samples");
            for (Comparison c : comparisons) {
                for (String t : c.transports) {
                    if (!c.has(t)) {
                        continue;
                    }
                    double[] mps = c.values(t, Figures::messagesPerSecond);
                    double[] p50 = c.values(t, f -> f.percentileMicros(50));
                    boolean ours = t.equals("rdma");
                    csv.printf(Locale.ROOT, "%s,%d,%s,%.0f,%.2f,%.1f,%.1f,%.1f,%.1f,%.1f,%d,%.1f,%d,%.0f,%.0f,%.1f,"
                                    + "%.1f,%s,%s,%s,%s,%s,%s%n", c.scenario.delivery(), c.scenario.pairs(), t,
                            ArtemisTransportBenchmark.median(mps), c.median(t, Figures::cpuMicrosPerMessage),
                            ArtemisTransportBenchmark.median(p50), c.median(t, f -> f.percentileMicros(90)),
                            c.median(t, f -> f.percentileMicros(99)), c.median(t, f -> f.percentileMicros(99.9)),
                            c.median(t, f -> f.latency.getMaxValue() / 1000.0), settings.rate(c.scenario),
                            c.median(t, Figures::cpuPercentAtRate), mps.length, Arrays.stream(mps).min().orElse(0),
                            Arrays.stream(mps).max().orElse(0), Arrays.stream(p50).min().orElse(0),
                            Arrays.stream(p50).max().orElse(0),
                            ratioCell(ours && c.has("invm"), c, "invm", Figures::messagesPerSecond),
                            ratioCell(ours && c.has("tcp"), c, "tcp", Figures::messagesPerSecond),
                            ratioCell(ours && c.has("invm"), c, "invm", f -> f.percentileMicros(50)),
                            ratioCell(ours && c.has("tcp"), c, "tcp", f -> f.percentileMicros(50)),
                            ratioCell(ours && c.has("invm"), c, "invm", Figures::cpuMicrosPerMessage),
                            ratioCell(ours && c.has("tcp"), c, "tcp", Figures::cpuMicrosPerMessage));
                    for (Figures f : c.rounds(t)) {
                        rounds.printf(Locale.ROOT, "%s,%d,%s,%d,%.0f,%.2f,%.1f,%.1f,%.1f,%.1f,%.1f,%d,%.1f,%.2f,%d,"
                                        + "%d%n", c.scenario.delivery(), c.scenario.pairs(), t, f.round,
                                f.messagesPerSecond, f.cpuMicrosPerMessage, f.percentileMicros(50),
                                f.percentileMicros(90), f.percentileMicros(99), f.percentileMicros(99.9),
                                f.latency.getMaxValue() / 1000.0, settings.rate(c.scenario), f.cpuPercentAtRate,
                                f.messages == 0 ? 0 : (double) f.fabricSends / f.messages, f.throughputStart,
                                f.throughputEnd);
                    }
                    Path hgrm = out.resolve(String.format(Locale.ROOT, "artemis-host-latency-%s-%d-%s.hgrm",
                            c.scenario.delivery(), c.scenario.pairs(), t));
                    try (PrintStream ps = new PrintStream(Files.newOutputStream(hgrm), false, "UTF-8")) {
                        c.medianLatencyRound(t).latency.outputPercentileDistribution(ps, 1000.0);
                    }
                    if (!profiles.isEmpty()) {
                        Profile p = profiles.get(Profile.key(c.scenario, t));
                        for (Map.Entry<String, Double> e : split(c, t, profiles).entrySet()) {
                            prof.printf(Locale.ROOT, "%s,%d,%s,%s,%.3f,%d%n", c.scenario.delivery(),
                                    c.scenario.pairs(), t, e.getKey(), e.getValue(),
                                    p == null ? 0 : p.byComponent.getOrDefault(e.getKey(), 0L));
                        }
                        if (p != null) {
                            hot.printf(Locale.ROOT, "%s, %s: %d samples, hottest methods (self, top frame):%n",
                                    c.scenario.label(), label(t), p.samples);
                            for (Map.Entry<String, Long> e : p.hottest(25)) {
                                hot.printf(Locale.ROOT, "  %5.1f %%  %s%n", 100.0 * e.getValue() / p.samples,
                                        e.getKey());
                            }
                            hot.printf(Locale.ROOT, "  ours (samples of our components, by the first frame of "
                                    + "dev.artemisrdma from the top: our methods with the JDK and Netty code they call):%n");
                            List<Map.Entry<String, Long>> mine = new ArrayList<>(p.byOurMethod.entrySet());
                            mine.sort(Map.Entry.<String, Long>comparingByValue().reversed());
                            for (Map.Entry<String, Long> e : mine.subList(0, Math.min(30, mine.size()))) {
                                hot.printf(Locale.ROOT, "  %5.1f %%  %s%n", 100.0 * e.getValue() / p.samples,
                                        e.getKey());
                            }
                            hot.println();
                        }
                    }
                }
            }
        }
        System.out.println("artemis-host-bench: summary, rounds, profile split, hot methods and latency distributions "
                + "in " + out.toAbsolutePath());
    }

    private static String ratioCell(boolean present, Comparison c, String base, ToDoubleFunction<Figures> figure) {
        return present ? String.format(Locale.ROOT, "%.3f", ArtemisTransportBenchmark.median(c.ratios("rdma", base,
                figure))) : "";
    }
}
