package dev.artemisrdma.it.distro;

import dev.artemisrdma.it.artemis.LabBroker;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.function.Consumer;

/**
 * The Apache Artemis binary distribution as Maven unpacked it into {@code it-tests/target/artemis-distribution}
 * (the lab has no network, so it is fetched on the host), and the jars this build makes for a broker's
 * {@code lib/} ({@code it-tests/target/distribution-lib}).
 */
public final class ArtemisDistribution {

    private final Path home;
    private final Path jarDir;
    private final Properties versions;

    private ArtemisDistribution(Path home, Path jarDir, Properties versions) {
        this.home = home;
        this.jarDir = jarDir;
        this.versions = versions;
    }

    public static ArtemisDistribution unpacked() throws IOException {
        Properties versions = new Properties();
        try (InputStream in = ArtemisDistribution.class.getResourceAsStream("distribution.properties")) {
            if (in == null) {
                throw new IllegalStateException("distribution.properties is not on the class path: build it-tests "
                        + "with Maven (mvn -pl it-tests process-test-resources)");
            }
            versions.load(in);
        }
        Path target = projectRoot().resolve("it-tests/target");
        Path home = target.resolve("artemis-distribution/apache-artemis-" + versions.getProperty("artemis.version"));
        if (!Files.isExecutable(home.resolve("bin/artemis"))) {
            throw new IllegalStateException(home + "/bin/artemis is missing: Maven unpacks the distribution in "
                    + "generate-test-resources (mvn -pl it-tests generate-test-resources, with network access)");
        }
        // the release archive as Maven unpacked it (the distribution module's artemis-rdma-VERSION-bin.tar.gz)
        Path lib = target.resolve("release/artemis-rdma-" + versions.getProperty("connector.version") + "/lib");
        if (!Files.isDirectory(lib)) {
            throw new IllegalStateException(lib + " is missing: Maven unpacks the release archive in "
                    + "generate-test-resources (mvn -pl distribution,it-tests -am generate-test-resources)");
        }
        return new ArtemisDistribution(home, lib, versions);
    }

    public static Path projectRoot() {
        return LabBroker.configDir().getParent();
    }

    public Path home() {
        return home;
    }

    public String artemisVersion() {
        return versions.getProperty("artemis.version");
    }

    public String connectorVersion() {
        return versions.getProperty("connector.version");
    }

    public String jnaVersion() {
        return versions.getProperty("jna.version");
    }

    /** The release archive's lib/: the jars README names, under their released file names. */
    public Path jarDir() {
        return jarDir;
    }

    /**
     * {@code artemis create} without questions: a user admin/admin, anonymous clients allowed (config/jndi.properties
     * names no user), no web console, no journal auto-tuning (it writes for seconds; the lab is emulated).
     * {@code brokerOptions} go to the broker's JVM ({@code artemis run}), {@code cliOptions} to the JVMs of create
     * itself and of the instance's other commands (queue stat, stop).
     */
    public ArtemisInstance create(Path dir, List<String> brokerOptions, List<String> cliOptions, Consumer<String> out)
            throws Exception {
        List<String> command = new ArrayList<>(List.of(home.resolve("bin/artemis").toString(), "create", "--silent",
                "--user", ArtemisInstance.USER, "--password", ArtemisInstance.PASSWORD, "--allow-anonymous",
                "--no-web", "--no-autotune"));
        brokerOptions.forEach(option -> command.add("--java-options=" + option));
        cliOptions.forEach(option -> command.add("--java-utility-options=" + option));
        command.add(dir.toString());
        // the distribution's script uses JAVA_ARGS as it is, else its own default heap
        Cli.run(command, String.join(" ", cliOptions), Duration.ofMinutes(3), out);
        return new ArtemisInstance(dir);
    }
}
