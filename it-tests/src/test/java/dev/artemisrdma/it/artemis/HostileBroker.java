package dev.artemisrdma.it.artemis;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * {@link HostileBrokerMain} in a child JVM with {@code -Xmx1g}: its whole output goes to a log file (the lab's
 * serial console is slow), is kept for the test to search (the broker's reasons for closing connections), and only
 * our transport's warnings and errors are echoed. {@link #stats()} asks the broker for its heap and counters.
 */
final class HostileBroker implements AutoCloseable {

    private final Process process;
    private final PrintWriter commands;
    private final List<String> lines = new CopyOnWriteArrayList<>();
    private final BlockingQueue<String> answers = new LinkedBlockingQueue<>();
    private final CountDownLatch ready = new CountDownLatch(1);
    private final Path log;

    private HostileBroker(Process process, Path log) throws IOException {
        this.process = process;
        this.log = log;
        this.commands = new PrintWriter(new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8),
                true);
        Writer file = Files.newBufferedWriter(log, StandardCharsets.UTF_8);
        Thread pump = new Thread(() -> pump(file), "hostile-broker-output");
        pump.setDaemon(true);
        pump.start();
    }

    static HostileBroker start(String host, int port, Path dataDir, String acceptorQuery) throws Exception {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-Xmx1g");
        command.add("-XX:TieredStopAtLevel=1");
        command.add("-Djava.io.tmpdir=" + System.getProperty("java.io.tmpdir"));
        command.add("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn");
        command.add("-Dorg.slf4j.simpleLogger.log.dev.artemisrdma=info");
        command.add("-Dorg.slf4j.simpleLogger.showDateTime=true");
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(HostileBrokerMain.class.getName());
        command.addAll(List.of(host, Integer.toString(port), dataDir.toString(), acceptorQuery));
        String results = System.getenv("RDMA_LAB_RESULTS");
        Path dir = results == null || results.isEmpty() ? Path.of(System.getProperty("java.io.tmpdir"))
                : Path.of(results);
        Path log = dir.resolve("hostile-broker-" + ProcessHandle.current().pid() + ".log");
        HostileBroker broker = new HostileBroker(new ProcessBuilder(command).redirectErrorStream(true).start(), log);
        System.out.println("hostile broker (pid " + broker.pid() + ") logs to " + log);
        if (!broker.ready.await(180, TimeUnit.SECONDS)) {
            broker.close();
            throw new IllegalStateException("the hostile broker did not start within 180 s; see " + log);
        }
        return broker;
    }

    private void pump(Writer file) {
        try (BufferedReader reader = new BufferedReader(new InputStreamReader(process.getInputStream(),
                StandardCharsets.UTF_8)); file) {
            String line;
            while ((line = reader.readLine()) != null) {
                file.write(line);
                file.write('\n');
                file.flush();
                if (line.startsWith("STATS ") || line.equals("RESET")) {
                    answers.add(line);
                    continue;
                }
                lines.add(line);
                if (line.contains(HostileBrokerMain.READY)) {
                    ready.countDown();
                }
                if (line.contains("dev.artemisrdma") && (line.contains(" WARN ") || line.contains(" ERROR "))) {
                    System.out.println("[broker] " + line);
                }
            }
        } catch (IOException ignored) {
            // process gone
        }
    }

    long pid() {
        return process.pid();
    }

    Path log() {
        return log;
    }

    /** The broker's transport counters and heap. */
    Map<String, Long> stats() throws InterruptedException {
        return ask("stats");
    }

    /** As {@link #stats()}, after a full GC: {@code heapAfterGc} is the heap the broker really holds. */
    Map<String, Long> heap() throws InterruptedException {
        return ask("heap");
    }

    private Map<String, Long> ask(String command) throws InterruptedException {
        commands.println(command);
        String answer = answers.poll(60, TimeUnit.SECONDS);
        if (answer == null) {
            throw new IllegalStateException("the hostile broker did not answer '" + command + "' within 60 s; see "
                    + log);
        }
        Map<String, Long> values = new HashMap<>();
        for (String pair : answer.substring("STATS ".length()).split(" ")) {
            int eq = pair.indexOf('=');
            values.put(pair.substring(0, eq), Long.parseLong(pair.substring(eq + 1)));
        }
        return values;
    }

    /** Starts a new peak of heap after GC. */
    void resetPeak() throws InterruptedException {
        commands.println("reset");
        if (answers.poll(60, TimeUnit.SECONDS) == null) {
            throw new IllegalStateException("the hostile broker did not answer 'reset'; see " + log);
        }
    }

    /** Waits (bounded) for a line of the broker's output that {@code matches}; returns it, or null. */
    String awaitLine(Predicate<String> matches, long timeoutMillis) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMillis;
        while (true) {
            for (String line : lines) {
                if (matches.test(line)) {
                    return line;
                }
            }
            if (System.currentTimeMillis() > deadline) {
                return null;
            }
            Thread.sleep(50);
        }
    }

    @Override
    public void close() throws InterruptedException {
        commands.close(); // end of stdin: the broker exits
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
            process.destroy();
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                process.waitFor(30, TimeUnit.SECONDS);
            }
        }
    }
}
