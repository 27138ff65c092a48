package dev.artemisrdma.transport;

import dev.artemisrdma.ConnectorSources;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

/**
 * The transport's packages import downward only: each names (imports or spells out) only the packages this test
 * allows it, which form the layers argued in the package-info of {@code dev.artemisrdma.transport}. A new import that
 * runs upward, or a new package, fails here with the file that does it. Reads the sources, so it needs no RDMA.
 */
class PackageLayersTest {

    private static final String BASE = "dev.artemisrdma.transport";
    /** Package (under BASE; "" for BASE itself) to the packages it may use besides its own. */
    private static final Map<String, Set<String>> ALLOWED = Map.ofEntries(
            Map.entry("", Set.of("fabric", "stats", "config", "api", "wire", "flow", "loop", "channel", "tls")),
            Map.entry("tls", Set.of("fabric", "stats", "api")),
            Map.entry("channel", Set.of("fabric", "stats", "config", "api", "wire", "flow", "loop")),
            Map.entry("loop", Set.of("fabric", "stats", "config", "wire", "flow")),
            Map.entry("flow", Set.of("fabric", "stats", "config", "api", "wire")),
            Map.entry("wire", Set.of("fabric", "config")),
            Map.entry("api", Set.of("fabric", "stats")),
            Map.entry("config", Set.of("fabric")),
            Map.entry("stats", Set.of("fabric")),
            Map.entry("verbs", Set.of("fabric", "dev.artemisrdma.verbs")),
            Map.entry("fabric", Set.of()));
    private static final Pattern PACKAGE = Pattern.compile("^package ([\\w.]+);", Pattern.MULTILINE);
    /** A reference to a class of the project: the package is what precedes the first capitalised name. */
    private static final Pattern REFERENCE = Pattern.compile("\\bdev\\.artemisrdma((?:\\.[a-z]\\w*)+)\\.[A-Z]");

    @Test
    void everyPackageUsesOnlyThePackagesBelowIt() throws IOException {
        Path sources = ConnectorSources.moduleRoot().resolve("src/main/java/" + BASE.replace('.', '/'));
        List<String> upward = new ArrayList<>();
        Set<String> seen = new TreeSet<>();
        try (Stream<Path> files = Files.walk(sources)) {
            for (Path file : files.filter(f -> f.toString().endsWith(".java")).toList()) {
                String code = withoutCommentsAndStrings(Files.readString(file));
                Matcher pm = PACKAGE.matcher(code);
                assertTrue(pm.find(), file + " has no package");
                String own = relative(pm.group(1));
                seen.add(own);
                Set<String> allowed = ALLOWED.get(own);
                if (allowed == null) {
                    upward.add(file.getFileName() + ": package " + pm.group(1) + " has no place in the layers");
                    continue;
                }
                Matcher m = REFERENCE.matcher(code);
                while (m.find()) {
                    String used = relative("dev.artemisrdma" + m.group(1));
                    if (!used.equals(own) && !allowed.contains(used)) {
                        upward.add(pm.group(1) + "/" + file.getFileName() + " -> " + used);
                    }
                }
            }
        }
        assertEquals(ALLOWED.keySet(), seen, "the packages of the transport");
        assertEquals(List.of(), upward, "references that run upward (or sideways)");
    }

    /** "" for BASE, the rest of the name for a package under it, the whole name for any other. */
    private static String relative(String pkg) {
        return pkg.equals(BASE) ? "" : pkg.startsWith(BASE + ".") ? pkg.substring(BASE.length() + 1) : pkg;
    }

    private static String withoutCommentsAndStrings(String s) {
        return s.replaceAll("(?s)/\\*.*?\\*/", "").replaceAll("//[^\\n]*", "")
                .replaceAll("\"(\\\\.|[^\"\\\\])*\"", "\"\"");
    }
}
