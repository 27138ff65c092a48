package dev.artemisrdma.it.distro;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/** Runs an Artemis command line script ({@code bin/artemis ...}) to completion with this JVM's Java. */
final class Cli {

    private Cli() {
    }

    /**
     * Starts {@code command} with JAVA_HOME set to this JVM's; JAVA_ARGS (which the scripts take instead of their
     * profile's options when set) is {@code javaArgs}, or unset when that is empty.
     */
    static Process start(List<String> command, String javaArgs) throws IOException {
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().put("JAVA_HOME", System.getProperty("java.home"));
        builder.environment().remove("JAVA_ARGS");
        if (!javaArgs.isEmpty()) {
            builder.environment().put("JAVA_ARGS", javaArgs);
        }
        return builder.start();
    }

    /** Runs {@code command}, passes each output line to {@code out}, returns the output; fails unless it exits 0. */
    static String run(List<String> command, String javaArgs, Duration timeout, Consumer<String> out)
            throws Exception {
        Process process = start(command, javaArgs);
        process.getOutputStream().close();
        StringBuilder output = new StringBuilder();
        Thread pump = new Thread(() -> {
            try (BufferedReader reader = new BufferedReader(new InputStreamReader(process.getInputStream(),
                    StandardCharsets.UTF_8))) {
                String line;
                while ((line = reader.readLine()) != null) {
                    synchronized (output) {
                        output.append(line).append('\n');
                    }
                    out.accept(line);
                }
            } catch (IOException ignored) {
                // the process is gone; its exit code says the rest
            }
        }, "artemis-cli-output");
        pump.start();
        if (!process.waitFor(timeout.toSeconds(), TimeUnit.SECONDS)) {
            process.destroyForcibly();
            throw new IllegalStateException(String.join(" ", command) + " did not finish within " + timeout);
        }
        pump.join(10_000);
        synchronized (output) {
            if (process.exitValue() != 0) {
                throw new IllegalStateException(String.join(" ", command) + " exited with " + process.exitValue()
                        + ":\n" + output);
            }
            return output.toString();
        }
    }
}
