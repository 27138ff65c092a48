package dev.artemisrdma.it.pairs;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import dev.artemisrdma.it.JavaProcess;

/**
 * A {@link PairBrokerMain} process (launched by {@link JavaProcess}): started, asked for {@link #report()}s, stopped,
 * killed (SIGKILL) and started again on the same data. Its log goes to a file in the results folder (the lab console
 * is slow), prefixed lines that matter to the console.
 */
final class PairBroker implements AutoCloseable {

    /** Artemis's client session factory: logs "Trying to connect with connectorFactory=..." at debug per attempt. */
    private static final String SESSION_FACTORY_LOGGER =
            "org.apache.activemq.artemis.core.client.impl.ClientSessionFactoryImpl";
    private static final String ATTEMPT = "Trying to connect with connectorFactory=";
    private static final Pattern WARNING_CODE = Pattern.compile("AMQ\\d{6}");

    private final String name;
    private final List<String> args;
    private final Path log;
    private final JavaProcess.Builder launcher;
    private JavaProcess process;
    private final BlockingQueue<String> reports = new LinkedBlockingQueue<>();
    private final AtomicInteger nettyAttempts = new AtomicInteger();
    private final List<String> firstNettyAttempts = new CopyOnWriteArrayList<>();
    /** Artemis's warning and error codes the broker logged (AMQ22xxxx, AMQ21xxxx, ...), with how often. */
    private final Map<String, Integer> warnings = new ConcurrentSkipListMap<>();
    /** Where the broker's connector classes came from, as it said at start. */
    private volatile String connector;

    private PairBroker(String name, List<String> args, Path log, String classPath) {
        this.name = name;
        this.args = args;
        this.log = log;
        this.launcher = JavaProcess.main(PairBrokerMain.class).name(name)
                .classPath(classPath != null ? classPath : System.getProperty("java.class.path"))
                .jvm("-Xmx768m", "-XX:TieredStopAtLevel=1")
                .property("org.slf4j.simpleLogger.defaultLogLevel", "warn")
                .property("org.slf4j.simpleLogger.log.dev.artemisrdma", "info")
                .property("org.slf4j.simpleLogger.log.org.apache.activemq.audit", "warn")
                // logs every connection attempt of the broker's own clients (cluster controller, cluster bridges,
                // core bridges, the backup's link) with the connector factory it uses: see nettyAttempts()
                .property("org.slf4j.simpleLogger.log." + SESSION_FACTORY_LOGGER, "debug")
                .property("org.slf4j.simpleLogger.showDateTime", "true")
                .log(log, true).intercept(this::take).readyWhen(PairBrokerMain.READY, 180)
                .echo(line -> !line.contains(PairBrokerMain.READY)
                        && !line.contains(" DEBUG ") // the attempts' log (thread names carry AMQ229000 codes)
                        && (line.contains("ERROR") || line.contains("AMQ22")) && !line.contains("AMQ222165")
                        && !line.contains("AMQ222166")); // not the sample's "no dead letter address" noise
    }

    /** Starts {@code config/pairs/FILE} with the given substitutions (and {@code tcp} to stay off RDMA). */
    static PairBroker start(String name, String file, Path data, boolean tcp, Map<String, String> properties)
            throws Exception {
        return start(name, file, data, tcp, properties, null);
    }

    /** As above, on {@code classPath} (null: this JVM's), for a broker on an older build's connector. */
    static PairBroker start(String name, String file, Path data, boolean tcp, Map<String, String> properties,
                            String classPath) throws Exception {
        return start(name, file, data, tcp, properties, classPath, null);
    }

    /** As above, on {@code host} of the two-host lab (null: this one). */
    static PairBroker start(String name, String file, Path data, boolean tcp, Map<String, String> properties,
                            String classPath, dev.artemisrdma.it.hosts.LabHost host) throws Exception {
        List<String> args = new ArrayList<>(List.of(file, data.toString()));
        if (tcp) {
            args.add("tcp");
        }
        properties.forEach((k, v) -> args.add(k + "=" + v));
        PairBroker broker = new PairBroker(name, args, JavaProcess.resultsDir().resolve("broker-" + name + "-"
                + System.nanoTime() + ".log"), classPath);
        broker.launcher.on(host);
        broker.launch();
        return broker;
    }

    private void launch() throws Exception {
        process = launcher.start(args);
    }

    /** The pump thread's: counts Netty attempts; takes the broker's reports (not echoed). */
    private boolean take(String line) {
        if (line.startsWith(PairBrokerMain.CONNECTOR)) {
            connector = line.substring(PairBrokerMain.CONNECTOR.length()).strip();
            return true;
        }
        if (line.contains(" WARN ") || line.contains(" ERROR ")) {
            Matcher code = WARNING_CODE.matcher(line);
            warnings.merge(code.find() ? code.group() : line.contains(" ERROR ") ? "ERROR" : "WARN", 1, Integer::sum);
        }
        if (line.contains(ATTEMPT) && line.contains("NettyConnectorFactory")) {
            if (nettyAttempts.incrementAndGet() <= 3) {
                firstNettyAttempts.add(line);
            }
        }
        if (line.startsWith(PairBrokerMain.REPORT)) {
            reports.add(line.substring(PairBrokerMain.REPORT.length()));
            return true;
        }
        return false;
    }

    /**
     * How many connection attempts the broker's own clients (cluster controller and cluster bridges, core bridges,
     * the backup's link to its primary) made with Netty's connector factory since the first start, from Artemis's
     * own log of each attempt; with the first few attempts' log lines.
     */
    int nettyAttempts() {
        return nettyAttempts.get();
    }

    List<String> firstNettyAttempts() {
        return List.copyOf(firstNettyAttempts);
    }

    /** The warning and error codes the broker logged since its first start, each with its count, and its log. */
    String warnings() {
        return warnings + " (log " + log.getFileName() + ")";
    }

    /** The broker's {@code LinkReport}, as a map. */
    Map<String, String> report() throws InterruptedException {
        reports.clear();
        process.send("report");
        String line = reports.poll(30, TimeUnit.SECONDS);
        if (line == null) {
            throw new IllegalStateException("broker " + name + " did not report; log: " + log);
        }
        Map<String, String> report = new HashMap<>();
        for (String pair : line.split(" ")) {
            int eq = pair.indexOf('=');
            report.put(pair.substring(0, eq), pair.substring(eq + 1));
        }
        return report;
    }

    /** Polls reports until {@code condition} holds; the last report in the failure message. */
    Map<String, String> await(String what, Predicate<Map<String, String>> condition, long seconds)
            throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        Map<String, String> report = report();
        while (!condition.test(report)) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("broker " + name + ": " + what + " not reached in " + seconds + " s: "
                        + report + "; log: " + log);
            }
            Thread.sleep(200);
            report = report();
        }
        return report;
    }

    /** SIGKILL: no shutdown hook, no orderly disconnect; the kernel tears the process's RDMA resources down. */
    /** Where the broker's connector classes came from (a jar or a classes folder), as it said at start. */
    String connector() {
        return connector;
    }

    /** A signal to the broker process ({@link JavaProcess#signal}): SIGSTOP makes a backup that reads nothing. */
    void signal(String signal) throws java.io.IOException, InterruptedException {
        process.signal(signal);
    }

    /** The broker's log so far (every line it printed since its first start). */
    String log() throws java.io.IOException {
        return java.nio.file.Files.readString(log);
    }

    void kill() throws InterruptedException {
        process.kill();
    }

    /** Starts the same broker again, on the same data. */
    void restart() throws Exception {
        launch();
    }

    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) {
            process.send("stop");
            if (!process.awaitExit(60)) {
                kill();
            }
        }
    }

    @Override
    public String toString() {
        return name;
    }

    static Map<String, String> props(String... keyValues) {
        Map<String, String> map = new HashMap<>();
        for (int i = 0; i < keyValues.length; i += 2) {
            map.put(keyValues[i], keyValues[i + 1]);
        }
        return map;
    }
}
