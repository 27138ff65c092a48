package dev.artemisrdma;

import java.nio.file.Files;
import java.nio.file.Path;

/** Where the connector module's main sources are, for the tests that read them (layers, class comments). */
public final class ConnectorSources {

    private ConnectorSources() {
    }

    /** The connector module's root, found from the working directory (the module's, or the project's). */
    public static Path moduleRoot() {
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isDirectory(p.resolve("src/main/java/dev/artemisrdma/transport"))) {
                return p;
            }
            if (Files.isDirectory(p.resolve("artemis-rdma-connector/src/main/java"))) {
                return p.resolve("artemis-rdma-connector");
            }
        }
        throw new IllegalStateException("no connector module above " + Path.of("").toAbsolutePath());
    }
}
