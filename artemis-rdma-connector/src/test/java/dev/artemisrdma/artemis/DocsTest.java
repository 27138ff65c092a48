package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

/**
 * The documentation against the repository and the code: every relative link and image in README.md, docs/**.md and
 * it-tests/bench/README.md names a file or folder that exists (and a heading, where it names one in a Markdown
 * file), and README's configuration table lists exactly the
 * keys the acceptor and the connector accept ({@link RdmaParameters#ACCEPTOR_KEYS},
 * {@link RdmaParameters#CONNECTOR_KEYS}), each with the side(s) that accept it.
 */
class DocsTest {

    /** A Markdown link or image: {@code [text](target)} or {@code ![alt](target "title")}. */
    private static final Pattern LINK = Pattern.compile("!?\\[[^\\]]*\\]\\(\\s*<?([^)\\s>]+)>?(?:\\s+\"[^\"]*\")?\\s*\\)");
    private static final Pattern SCHEME = Pattern.compile("^[A-Za-z][A-Za-z0-9+.-]*:");
    private static final Pattern CODE_KEY = Pattern.compile("`([^`]+)`");

    @Test
    void everyRelativeLinkResolvesToAFileInTheRepository() throws IOException {
        Path root = repositoryRoot();
        List<String> broken = new ArrayList<>();
        int checked = 0;
        for (Path doc : documents(root)) {
            String text = withoutCodeBlocks(Files.readString(doc));
            Matcher m = LINK.matcher(text);
            while (m.find()) {
                String target = m.group(1);
                if (SCHEME.matcher(target).find()) {
                    continue;
                }
                String path = target.replaceFirst("[#?].*$", "");
                Path resolved = path.isEmpty() ? doc : doc.getParent().resolve(path).normalize();
                checked++;
                if (!resolved.startsWith(root) || !Files.exists(resolved)) {
                    broken.add(root.relativize(doc) + ": " + target);
                } else if (target.contains("#") && resolved.toString().endsWith(".md")
                        && !anchors(resolved).contains(target.substring(target.indexOf('#') + 1))) {
                    broken.add(root.relativize(doc) + ": " + target + " (no such heading)");
                }
            }
        }
        assertTrue(checked > 0, "no relative link found at all: is the repository root right? " + root);
        assertEquals(List.of(), broken, "relative links and images that name no file in the repository");
    }

    @Test
    void configurationTableListsExactlyTheKeysTheCodeAccepts() throws IOException {
        Map<String, String> table = configurationTable(Files.readString(repositoryRoot().resolve("README.md")));
        Set<String> accepted = new TreeSet<>(RdmaParameters.ACCEPTOR_KEYS);
        accepted.addAll(RdmaParameters.CONNECTOR_KEYS);

        Set<String> missing = new TreeSet<>(accepted);
        missing.removeAll(table.keySet());
        assertEquals(Set.of(), missing, "keys the code accepts that README's configuration table does not list");
        Set<String> refused = new TreeSet<>(table.keySet());
        refused.removeAll(accepted);
        assertEquals(Set.of(), refused, "keys in README's configuration table that the code refuses");

        List<String> wrongSide = new ArrayList<>();
        table.forEach((key, side) -> {
            String expected = (RdmaParameters.ACCEPTOR_KEYS.contains(key) ? "A" : "")
                    + (RdmaParameters.CONNECTOR_KEYS.contains(key) ? "C" : "");
            if (!side.equals(expected)) {
                wrongSide.add(key + " is listed for side '" + side + "', the code accepts it on '" + expected + "'");
            }
        });
        assertEquals(List.of(), wrongSide, "README's Side column (A = acceptor, C = connector)");
    }

    /** Key to side (its Side cell up to the first blank) of each row of the table under "## Configuration". */
    static Map<String, String> configurationTable(String readme) {
        int start = readme.indexOf("\n## Configuration\n");
        assertTrue(start >= 0, "README.md has no '## Configuration' section");
        int end = readme.indexOf("\n## ", start + 1);
        String section = readme.substring(start, end < 0 ? readme.length() : end);
        Map<String, String> keys = new LinkedHashMap<>();
        boolean header = true;
        for (String line : section.split("\n")) {
            if (!line.startsWith("|")) {
                continue;
            }
            String[] cells = line.split("(?<!\\\\)\\|");
            if (header || cells[1].strip().startsWith("---")) {
                header = false; // the header row, then the separator
                continue;
            }
            Matcher m = CODE_KEY.matcher(cells[1]);
            assertTrue(m.find(), "a configuration row without a `key` in its first cell: " + line);
            String side = cells[2].strip().split("\\s+")[0];
            do {
                assertFalse(keys.containsKey(m.group(1)), "key listed twice: " + m.group(1));
                keys.put(m.group(1), side);
            } while (m.find());
        }
        assertFalse(keys.isEmpty(), "README's '## Configuration' section has no table");
        return keys;
    }

    private static List<Path> documents(Path root) throws IOException {
        List<Path> docs = new ArrayList<>();
        docs.add(root.resolve("README.md"));
        Path bench = root.resolve("it-tests/bench/README.md");
        if (Files.exists(bench)) {
            docs.add(bench);
        }
        try (Stream<Path> walk = Files.walk(root.resolve("docs"))) {
            walk.filter(p -> p.toString().endsWith(".md")).sorted().forEach(docs::add);
        }
        return docs;
    }

    /** The anchors GitHub gives the headings of a Markdown file (a repeated heading gets -1, -2, ...). */
    static Set<String> anchors(Path doc) throws IOException {
        Set<String> anchors = new TreeSet<>();
        Map<String, Integer> seen = new LinkedHashMap<>();
        for (String line : withoutCodeBlocks(Files.readString(doc)).split("\n")) {
            if (line.matches("#{1,6} .*")) {
                String slug = line.replaceFirst("#+ ", "").strip().toLowerCase(java.util.Locale.ROOT)
                        .replaceAll("[^\\p{L}\\p{N} _-]", "").replace(' ', '-');
                int n = seen.merge(slug, 1, Integer::sum);
                anchors.add(n == 1 ? slug : slug + "-" + (n - 1));
            }
        }
        return anchors;
    }

    /** Fenced code blocks hold commands and XML, not links. */
    private static String withoutCodeBlocks(String text) {
        return text.replaceAll("(?ms)^```.*?^```", "");
    }

    /** The checkout's root: the first folder upwards from the working directory with README.md and docs/. */
    static Path repositoryRoot() {
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve("README.md")) && Files.isDirectory(p.resolve("docs"))
                    && Files.isDirectory(p.resolve("artemis-rdma-connector"))) {
                return p;
            }
        }
        throw new IllegalStateException("no repository root above " + Path.of("").toAbsolutePath());
    }
}
