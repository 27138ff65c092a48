package dev.artemisrdma;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

/**
 * Every main class over {@value #MAX_LINES} lines says in its class comment which thread or lock owns it (issue 39):
 * a reader who opens a large class learns first who may touch its state. The test cannot judge the sentence, only
 * that one is there: the class comment must name a thread, a lock, {@code synchronized}, immutability or an owner.
 * A large class without such a comment, or without a class comment, fails here by name. Reads the sources, so it
 * needs no RDMA.
 */
class ClassCommentOwnerTest {

    private static final int MAX_LINES = 150;
    /** The words that say who owns the state; a prefix match, so "threads", "locked" and "owners" count too. */
    private static final Pattern OWNERSHIP = Pattern.compile(
            "\\b(thread|lock|synchroni[sz]ed|immutable|owner|owns)", Pattern.CASE_INSENSITIVE);
    /** The first top-level type: at the start of a line, after its modifiers and annotations. */
    private static final Pattern TYPE = Pattern.compile(
            "^(?:@\\w+(?:\\([^)]*\\))?\\s+)*(?:(?:public|protected|private|abstract|final|sealed|non-sealed|static|strictfp)\\s+)*"
                    + "(?:class|interface|enum|record|@interface)\\s+(\\w+)",
            Pattern.MULTILINE);
    private static final Pattern JAVADOC = Pattern.compile("(?s)/\\*\\*.*?\\*/");

    @Test
    void everyLargeClassSaysWhoOwnsIt() throws IOException {
        Path sources = ConnectorSources.moduleRoot().resolve("src/main/java/dev/artemisrdma");
        List<String> silent = new ArrayList<>();
        int large = 0;
        try (Stream<Path> files = Files.walk(sources)) {
            for (Path file : files.filter(f -> f.toString().endsWith(".java")).sorted().toList()) {
                String source = Files.readString(file);
                if (file.getFileName().toString().equals("package-info.java") || source.lines().count() <= MAX_LINES) {
                    continue;
                }
                large++;
                String name = sources.relativize(file).toString().replace('\\', '/');
                String type = file.getFileName().toString().replace(".java", "");
                Matcher declared = TYPE.matcher(source);
                String comment = classComment(source);
                if (!declared.find() || !declared.group(1).equals(type)) {
                    silent.add(name + " (no top-level type " + type + " found: teach this test its declaration)");
                } else if (comment == null) {
                    silent.add(name + " (no class comment)");
                } else if (!OWNERSHIP.matcher(comment).find()) {
                    silent.add(name);
                }
            }
        }
        assertTrue(large > 0, "no class over " + MAX_LINES + " lines under " + sources);
        assertEquals(List.of(), silent,
                "classes over " + MAX_LINES + " lines whose class comment names no thread, lock or owner");
    }

    @Test
    void theClassCommentIsTheOneRightBeforeTheType() {
        String owned = "package p;\n\nimport java.util.List;\n\n/** Counts. Used by the loop's thread only. */\n"
                + "@SuppressWarnings(\"unused\")\npublic final class A {\n    /** Guarded by the lock. */\n    int n;\n}\n";
        assertTrue(OWNERSHIP.matcher(classComment(owned)).find(), "a class comment naming its thread");
        String silent = owned.replace("Used by the loop's thread only.", "Nothing more.");
        assertFalse(OWNERSHIP.matcher(classComment(silent)).find(), "a member's comment is not the class's");
        String beforeImports = "package p;\n\n/** Any thread. */\nimport java.util.List;\n\nfinal class B {\n}\n";
        assertNull(classComment(beforeImports), "a comment that an import follows is not the class's");
        assertFalse(OWNERSHIP.matcher("/** Blocks until the clock says so. */").find(), "block, clock: not lock");
    }

    /** The javadoc right before the first top-level type (annotations may stand between), or null if none. */
    static String classComment(String source) {
        Matcher type = TYPE.matcher(source);
        int typeStart = type.find() ? type.start() : source.length();
        Matcher doc = JAVADOC.matcher(source);
        String comment = null;
        int end = 0;
        while (doc.find() && doc.end() <= typeStart) {
            comment = doc.group();
            end = doc.end();
        }
        boolean adjacent = source.substring(end, typeStart).replaceAll("@\\w+(\\([^)]*\\))?", "").isBlank();
        return comment != null && adjacent ? comment : null;
    }
}
