package dev.artemisrdma.it.compat;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * The older builds of this connector that {@code run-lab-tests} has {@code build-old-connectors} make from this
 * repository's history before the lab boots (one folder each under {@value #PROPERTY}: its jar and revision, or a
 * FAILED file with the reason), and the class paths that run one of them instead of this build.
 */
public final class OlderBuilds {

    /** The folder the older builds are in, set by run-lab-tests. */
    public static final String PROPERTY = "rdma.compat.builds";

    /** An older build: its name (plain-v1, release-0.1.0), revision and jar. */
    public record Build(String name, String revision, Path jar) {
    }

    private OlderBuilds() {
    }

    /** Every older build, by name; fails, naming the reason, when one could not be built or none were. */
    public static List<Build> all() throws IOException {
        String dir = System.getProperty(PROPERTY);
        if (dir == null) {
            throw new IllegalStateException("-D" + PROPERTY + " is not set: run-lab-tests builds the older "
                    + "connectors and sets it; this test does not run without them");
        }
        List<Build> builds = new ArrayList<>();
        List<String> failed = new ArrayList<>();
        try (Stream<Path> entries = Files.list(Path.of(dir))) {
            for (Path build : entries.filter(Files::isDirectory).filter(p -> !p.getFileName().toString()
                    .startsWith("src-")).sorted().toList()) {
                if (Files.exists(build.resolve("FAILED"))) {
                    failed.add(build.getFileName() + ": " + Files.readString(build.resolve("FAILED")).strip());
                } else {
                    builds.add(new Build(build.getFileName().toString(),
                            Files.readString(build.resolve("revision")).strip(),
                            build.resolve("artemis-rdma-connector.jar")));
                }
            }
        }
        if (!failed.isEmpty()) {
            throw new IllegalStateException("older connectors that could not be built: " + failed);
        }
        return builds;
    }

    /** The last release that RELEASES names (its build is called release-VERSION). */
    public static Build lastRelease() throws IOException {
        List<Build> releases = all().stream().filter(b -> b.name().startsWith("release-")).toList();
        if (releases.size() != 1) {
            throw new IllegalStateException("expected the last release among the older builds, found " + releases
                    + " in " + System.getProperty(PROPERTY));
        }
        return releases.get(0);
    }

    /** {@code classPath} with both of this build's connector jars (main and tests) replaced by {@code jar}. */
    public static String withConnector(String classPath, Path jar) {
        List<String> entries = new ArrayList<>();
        int replaced = 0;
        for (String entry : classPath.split(File.pathSeparator)) {
            String file = Path.of(entry).getFileName().toString();
            if (file.startsWith("artemis-rdma-connector") || entry.endsWith("artemis-rdma-connector/target/classes")
                    || entry.endsWith("artemis-rdma-connector/target/test-classes")) {
                replaced++;
            } else {
                entries.add(entry);
            }
        }
        if (replaced == 0) {
            throw new IllegalStateException("this build's connector is not on the class path: " + classPath);
        }
        entries.add(0, jar.toString());
        return String.join(File.pathSeparator, entries);
    }
}
