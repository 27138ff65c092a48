package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;

/**
 * README's two commands and Install, and the scripts behind them, against what a fresh Debian 12 gets installed
 * (issue 40 item 5): every build tool they run must be one that {@code it-tests/lab/build-tools} installs (or that
 * {@code rdma-lab setup} installs), and the two commands' scripts must call build-tools first, so that a README that
 * names a new tool, or a script that starts using one, fails here instead of on a user's fresh machine.
 */
class ToolsDocTest {

    /** Build tools a command line may start with, and the Debian package that provides each. */
    private static final Map<String, String> TOOLS = Map.of("mvn", "maven", "java", "openjdk-17-jdk-headless",
            "javac", "openjdk-17-jdk-headless", "gcc", "gcc", "make", "make", "python3", "python3", "git", "git");
    private static final Pattern TOOL_CALL = Pattern.compile("(?m)(?:^\\s*|[`;&|(]\\s*|\\$\\(\\s*|"
            + "\\b(?:exec|if|then|do|else|time)\\s+)"
            + "(mvn|java|javac|gcc|make|python3|git)\\b");
    private static final Pattern INSTALLED = Pattern.compile("missing\\+=\\(([a-z0-9.-]+)\\)");

    @Test
    void everyToolTheCommandsAndTheirScriptsRunIsInstalledByBuildTools() throws IOException {
        Path root = DocsTest.repositoryRoot();
        String buildTools = Files.readString(root.resolve("it-tests/lab/build-tools"));
        Set<String> installed = new TreeSet<>();
        Matcher m = INSTALLED.matcher(buildTools);
        while (m.find()) {
            installed.add(m.group(1));
        }
        assertTrue(installed.containsAll(Set.of("maven", "openjdk-17-jdk-headless", "gcc")),
                "build-tools installs " + installed);
        String readme = Files.readString(root.resolve("README.md"));
        Map<String, String> sources = Map.of(
                "README's two commands", section(readme, "## The two commands"),
                "README's Install", section(readme, "## Install"),
                "it-tests/demo/rdma-demo", Files.readString(root.resolve("it-tests/demo/rdma-demo")),
                ".ci/run", Files.readString(root.resolve(".ci/run")),
                "it-tests/lab/run-lab-tests", Files.readString(root.resolve("it-tests/lab/run-lab-tests")),
                "it-tests/lab/build-old-connectors",
                Files.readString(root.resolve("it-tests/lab/build-old-connectors")));
        Set<String> notInstalled = new TreeSet<>();
        sources.forEach((where, text) -> {
            Matcher call = TOOL_CALL.matcher(text);
            while (call.find()) {
                String pkg = TOOLS.get(call.group(1));
                if (!installed.contains(pkg)) {
                    notInstalled.add(where + " runs " + call.group(1) + " (package " + pkg + ")");
                }
            }
        });
        assertEquals(Set.of(), notInstalled, "tools that it-tests/lab/build-tools does not install");
        for (String script : List.of("it-tests/demo/rdma-demo", ".ci/run")) {
            String text = Files.readString(root.resolve(script));
            int tools = text.indexOf("it-tests/lab/build-tools");
            int firstMvn = text.indexOf("\nmvn ");
            assertTrue(tools >= 0 && (firstMvn < 0 || tools < firstMvn), script + " must run it-tests/lab/build-tools "
                    + "before it runs Maven");
        }
    }

    private static String section(String readme, String heading) {
        int start = readme.indexOf("\n" + heading + "\n");
        assertTrue(start >= 0, "README.md has no '" + heading + "' section");
        int end = readme.indexOf("\n## ", start + 1);
        return readme.substring(start, end < 0 ? readme.length() : end);
    }
}
