package dev.artemisrdma.it.distro;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.stream.Stream;

/** A broker instance made by {@code artemis create}: what an operator edits, and its {@code bin/artemis}. */
public final class ArtemisInstance {

    static final String USER = "admin";
    static final String PASSWORD = "admin";

    private final Path dir;
    private final String createdBrokerXml;

    ArtemisInstance(Path dir) throws IOException {
        this.dir = dir;
        this.createdBrokerXml = Files.readString(dir.resolve("etc/broker.xml"));
    }

    public Path dir() {
        return dir;
    }

    /** Copies the named jars from {@code from} into {@code lib/} and checks that lib/ holds exactly those. */
    public void installJars(Path from, List<String> names) throws IOException {
        for (String name : names) {
            Path jar = from.resolve(name);
            if (!Files.isRegularFile(jar)) {
                throw new IllegalStateException("README names " + name + " but the build has no such jar in " + from
                        + ": " + Arrays.toString(from.toFile().list()));
            }
            Files.copy(jar, dir.resolve("lib").resolve(name), StandardCopyOption.REPLACE_EXISTING);
        }
        try (Stream<Path> lib = Files.list(dir.resolve("lib"))) {
            List<String> present = lib.map(p -> p.getFileName().toString()).sorted().toList();
            if (!present.equals(names.stream().sorted().toList())) {
                throw new IllegalStateException("lib/ holds " + present + ", not exactly " + names);
            }
        }
    }

    /**
     * Adds README's broker.xml lines to {@code etc/broker.xml}: the acceptor at the end of {@code <acceptors>}, the
     * plugin block at the end of {@code <core>}.
     */
    public void addToBrokerXml(String acceptorLine, String pluginBlock) throws IOException {
        Path brokerXml = dir.resolve("etc/broker.xml");
        String xml = Files.readString(brokerXml);
        xml = insertBefore(xml, "      </acceptors>", "         " + acceptorLine + "\n");
        xml = insertBefore(xml, "   </core>", pluginBlock.lines().map(l -> "      " + l + "\n")
                .reduce("", String::concat));
        Files.writeString(brokerXml, xml);
    }

    /** Back to the configuration create made: its broker.xml, no broker.properties (lib/ and data/ stay). */
    public void resetConfiguration() throws IOException {
        Files.writeString(dir.resolve("etc/broker.xml"), createdBrokerXml);
        Files.deleteIfExists(dir.resolve("etc/broker.properties"));
    }

    /** Installs a broker properties file as {@code etc/broker.properties}, which {@code artemis run} applies. */
    public void addBrokerProperties(Path file) throws IOException {
        Files.copy(file, dir.resolve("etc/broker.properties"), StandardCopyOption.REPLACE_EXISTING);
    }

    /** {@code artemis run}; returns once the broker says it is active. */
    public RunningBroker run(Path consoleLog, Consumer<String> echo) throws Exception {
        return RunningBroker.start(this, consoleLog, echo);
    }

    /**
     * {@code artemis queue stat} over the instance's own TCP acceptor ("artemis", made by create): the row of
     * {@code queue} as column name to value (CONSUMER_COUNT, MESSAGE_COUNT, MESSAGES_ADDED, MESSAGES_ACKED...).
     */
    public Map<String, String> queueStat(String queue, Consumer<String> out) throws Exception {
        String table = cli(Duration.ofMinutes(3), out, "queue", "stat", "--acceptor", "artemis", "--user", USER,
                "--password", PASSWORD, "--silent", "--single-line-header", "--queueName", queue);
        List<String[]> rows = table.lines().filter(l -> l.startsWith("|"))
                .map(l -> Arrays.stream(l.substring(1).split("\\|")).map(String::strip).toArray(String[]::new))
                .toList();
        if (rows.isEmpty() || !Arrays.asList(rows.get(0)).contains("NAME")) {
            throw new IllegalStateException("artemis queue stat printed no table:\n" + table);
        }
        String[] header = rows.get(0);
        for (String[] row : rows.subList(1, rows.size())) {
            if (row.length == header.length && row[0].equals(queue)) {
                Map<String, String> values = new HashMap<>();
                for (int i = 0; i < header.length; i++) {
                    values.put(header[i], row[i]);
                }
                return values;
            }
        }
        throw new IllegalStateException("artemis queue stat lists no queue " + queue + ":\n" + table);
    }

    /** Runs {@code bin/artemis ARGS} of this instance to completion; fails unless it exits 0. */
    public String cli(Duration timeout, Consumer<String> out, String... args) throws Exception {
        List<String> command = Stream.concat(Stream.of(script()), Stream.of(args)).toList();
        return Cli.run(command, "", timeout, out);
    }

    String script() {
        return dir.resolve("bin/artemis").toString();
    }

    private static String insertBefore(String text, String marker, String insertion) {
        int at = text.indexOf(marker);
        if (at < 0 || text.indexOf(marker, at + 1) >= 0) {
            throw new IllegalStateException("broker.xml made by artemis create has not exactly one '" + marker.strip()
                    + "' line");
        }
        return text.substring(0, at) + insertion + text.substring(at);
    }
}
