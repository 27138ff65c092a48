package dev.artemisrdma.it;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The head of a crashed JVM's fatal error report ({@code hs_err}, written where {@code -XX:ErrorFile} says), for a
 * failure message: the signal and where it hit, the problematic frame, the crashing thread and its native and Java
 * frames. A crash in the lab must say in CI's own output what crashed, since the lab's files do not outlive CI.
 */
final class FatalErrorReport {

    /** How many lines of the report's frames to quote. */
    private static final int FRAME_LINES = 40;

    private FatalErrorReport() {
    }

    /**
     * The summary of the newest report matching {@code errorFile} ({@code %p} for any pid) written after
     * {@code startedMillis} (less a minute: the lab hosts' clocks and the shared folder's may differ a little), or an
     * empty string when there is none.
     */
    static String summary(Path errorFile, long startedMillis) {
        Path dir = errorFile.getParent();
        String glob = errorFile.getFileName().toString().replace("%p", "*");
        Path newest = null;
        long newestTime = startedMillis - 60_000;
        try (DirectoryStream<Path> reports = Files.newDirectoryStream(dir, glob)) {
            for (Path report : reports) {
                long time = Files.getLastModifiedTime(report).toMillis();
                if (time >= newestTime) {
                    newest = report;
                    newestTime = time;
                }
            }
            return newest == null ? "" : summarize(newest, Files.readAllLines(newest, StandardCharsets.ISO_8859_1));
        } catch (IOException e) {
            return "; its fatal error report (" + errorFile + ") could not be read: " + e;
        }
    }

    private static String summarize(Path report, List<String> lines) {
        List<String> quoted = new ArrayList<>();
        boolean inFrames = false;
        int frames = 0;
        for (String line : lines) {
            if (line.startsWith("#  SIG") || line.startsWith("#  Internal Error") || line.startsWith("# Problematic")
                    || line.startsWith("# C  ") || line.startsWith("# J  ") || line.startsWith("# V  ")
                    || line.startsWith("Current thread") || line.startsWith("siginfo:")) {
                quoted.add(line);
            }
            if (line.startsWith("Native frames:") || line.startsWith("Java frames:")) {
                inFrames = true;
            } else if (line.isBlank()) {
                inFrames = false;
            }
            if (inFrames && frames < FRAME_LINES) {
                quoted.add(line);
                frames++;
            }
        }
        StringBuilder out = new StringBuilder("; its fatal error report ").append(report).append(':');
        quoted.forEach(line -> out.append("\n  # ").append(line));
        return out.toString();
    }
}
