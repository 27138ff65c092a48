package dev.artemisrdma.it.bench.scale;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * A main class of this class path in a JVM of its own, driven by lines: commands go to its stdin, its stdout lines
 * are queued for {@link #await} and written to {@code NAME.log} in the lab's results folder (errors, the first 20,
 * are echoed too: the lab's serial console is slow).
 */
public final class ChildJvm implements AutoCloseable {

    private final String name;
    private final Process process;
    private final Writer stdin;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();

    private ChildJvm(String name, Process process, Path log) {
        this.name = name;
        this.process = process;
        this.stdin = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
        Thread pump = new Thread(() -> {
            try (BufferedReader reader = new BufferedReader(new InputStreamReader(process.getInputStream(),
                    StandardCharsets.UTF_8));
                 Writer out = Files.newBufferedWriter(log, StandardCharsets.UTF_8)) {
                String line;
                int echoed = 0;
                while ((line = reader.readLine()) != null) {
                    lines.add(line);
                    out.write(line + "\n");
                    out.flush();
                    if ((line.startsWith("FAILED") || line.contains("ERROR")) && echoed++ < 20) {
                        System.out.println("[" + name + "] " + line);
                    }
                }
            } catch (IOException ignored) {
                // process gone
            }
            lines.add("EOF");
        }, name + "-output");
        pump.setDaemon(true);
        pump.start();
    }

    /** Starts {@code main} with {@code jvmOptions} and {@code args}; {@code classPathPrefix} (may be null) goes first. */
    public static ChildJvm start(String name, Class<?> main, String classPathPrefix, List<String> jvmOptions,
                          String... args) throws IOException {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(jvmOptions);
        command.add("-Djava.io.tmpdir=" + System.getProperty("java.io.tmpdir"));
        command.add("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn");
        command.add("-cp");
        String cp = System.getProperty("java.class.path");
        command.add(classPathPrefix == null ? cp : classPathPrefix + ":" + cp);
        command.add(main.getName());
        command.addAll(List.of(args));
        Path log = Path.of(System.getenv().getOrDefault("RDMA_LAB_RESULTS", System.getProperty("java.io.tmpdir")),
                name + ".log");
        return new ChildJvm(name, new ProcessBuilder(command).redirectErrorStream(true).start(), log);
    }

    public long pid() {
        return process.pid();
    }

    String name() {
        return name;
    }

    public void send(String command) throws IOException {
        stdin.write(command + "\n");
        stdin.flush();
    }

    /** The next line starting with {@code prefix}; fails on timeout or when the process ended. */
    public String await(String prefix, long timeoutSeconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
        while (true) {
            long left = deadline - System.nanoTime();
            String line = left <= 0 ? null : lines.poll(left, TimeUnit.NANOSECONDS);
            if (line == null) {
                throw new IllegalStateException(name + ": no '" + prefix + "' line within " + timeoutSeconds + " s");
            }
            if (line.equals("EOF")) {
                throw new IllegalStateException(name + " exited (code " + exitCode() + ") before printing '"
                        + prefix + "'");
            }
            if (line.startsWith("FAILED")) {
                throw new IllegalStateException(name + ": " + line);
            }
            if (line.startsWith(prefix)) {
                return line;
            }
        }
    }

    private String exitCode() {
        try {
            return process.waitFor(5, TimeUnit.SECONDS) ? Integer.toString(process.exitValue()) : "still running";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "?";
        }
    }

    /** Waits for the process to end by itself; kills it after {@code timeoutSeconds}. True when it ended itself. */
    public boolean awaitExit(long timeoutSeconds) throws InterruptedException {
        if (process.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
            return true;
        }
        process.destroyForcibly();
        process.waitFor(30, TimeUnit.SECONDS);
        return false;
    }

    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) {
            process.destroy();
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                process.waitFor(30, TimeUnit.SECONDS);
            }
        }
    }
}
