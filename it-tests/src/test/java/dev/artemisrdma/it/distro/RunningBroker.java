package dev.artemisrdma.it.distro;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * A broker started with {@code artemis run}, its console written to a log file and, line by line, to an echo.
 * {@link #stop} stops it as an operator does ({@code artemis stop}); {@link #close()} kills what is left.
 */
public final class RunningBroker implements AutoCloseable {

    /** What Artemis logs once every acceptor has started. */
    public static final String ACTIVE = "AMQ221007";
    /** What Artemis logs when it has stopped. */
    public static final String STOPPED = "AMQ221002";

    private final ArtemisInstance instance;
    private final Process process;
    private final List<String> lines = new ArrayList<>();
    private boolean ended;

    private RunningBroker(ArtemisInstance instance, Process process) {
        this.instance = instance;
        this.process = process;
    }

    static RunningBroker start(ArtemisInstance instance, Path consoleLog, Consumer<String> echo) throws Exception {
        Files.createDirectories(consoleLog.getParent());
        RunningBroker broker = new RunningBroker(instance, Cli.start(List.of(instance.script(), "run"), ""));
        broker.process.getOutputStream().close();
        Thread pump = new Thread(() -> broker.pump(consoleLog, echo), "artemis-run-output");
        pump.setDaemon(true);
        pump.start();
        try {
            broker.awaitLine(ACTIVE, Duration.ofMinutes(4));
        } catch (RuntimeException | InterruptedException e) {
            broker.close();
            throw e;
        }
        return broker;
    }

    private void pump(Path consoleLog, Consumer<String> echo) {
        try (BufferedReader reader = new BufferedReader(new InputStreamReader(process.getInputStream(),
                StandardCharsets.UTF_8));
             PrintWriter log = new PrintWriter(Files.newBufferedWriter(consoleLog), true)) {
            String line;
            while ((line = reader.readLine()) != null) {
                log.println(line);
                echo.accept(line);
                synchronized (lines) {
                    lines.add(line);
                    lines.notifyAll();
                }
            }
        } catch (IOException ignored) {
            // the process is gone
        } finally {
            synchronized (lines) {
                ended = true;
                lines.notifyAll();
            }
        }
    }

    /** Waits until the console shows a line containing {@code text}; fails if the broker exits first. */
    public String awaitLine(String text, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        synchronized (lines) {
            while (true) {
                for (String line : lines) {
                    if (line.contains(text)) {
                        return line;
                    }
                }
                if (ended) {
                    throw new IllegalStateException("artemis run ended before logging '" + text + "':\n"
                            + tail());
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new IllegalStateException("artemis run did not log '" + text + "' within " + timeout
                            + ":\n" + tail());
                }
                TimeUnit.NANOSECONDS.timedWait(lines, left);
            }
        }
    }

    /** The console lines so far that contain {@code text}. */
    public List<String> linesContaining(String text) {
        synchronized (lines) {
            return lines.stream().filter(l -> l.contains(text)).toList();
        }
    }

    /** {@code artemis stop}, then waits for {@code artemis run} to exit; returns its exit code. */
    public int stop(Consumer<String> out) throws Exception {
        instance.cli(Duration.ofMinutes(3), out, "stop");
        if (!process.waitFor(3, TimeUnit.MINUTES)) {
            throw new IllegalStateException("artemis run did not exit within 3 minutes of artemis stop:\n" + tail());
        }
        return process.exitValue();
    }

    private String tail() {
        synchronized (lines) {
            return String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size()));
        }
    }

    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) {
            process.destroyForcibly();
            process.waitFor(30, TimeUnit.SECONDS);
        }
    }
}
