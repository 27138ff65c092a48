package dev.artemisrdma.it.artemis;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

import dev.artemisrdma.it.JavaProcess;

/**
 * {@link HostileBrokerMain} in a child JVM with {@code -Xmx1g} (launched by {@link JavaProcess}): its whole output goes
 * to a log file (the lab's serial console is slow), is kept for the test to search (the broker's reasons for closing
 * connections), and only our transport's warnings and errors are echoed. {@link #stats()} asks the broker for its heap
 * and counters.
 */
final class HostileBroker implements AutoCloseable {

    private final JavaProcess process;
    private final BlockingQueue<String> answers;

    private HostileBroker(JavaProcess process, BlockingQueue<String> answers) {
        this.process = process;
        this.answers = answers;
    }

    static HostileBroker start(String host, int port, Path dataDir, String acceptorQuery) throws Exception {
        Path log = JavaProcess.resultsDir().resolve("hostile-broker-" + ProcessHandle.current().pid() + ".log");
        System.out.println("hostile broker logs to " + log);
        BlockingQueue<String> answers = new LinkedBlockingQueue<>();
        JavaProcess process = JavaProcess.main(HostileBrokerMain.class).name("broker")
                .jvm("-Xmx1g", "-XX:TieredStopAtLevel=1")
                .property("org.slf4j.simpleLogger.defaultLogLevel", "warn")
                .property("org.slf4j.simpleLogger.log.dev.artemisrdma", "info")
                .property("org.slf4j.simpleLogger.showDateTime", "true")
                .log(log, false)
                .intercept(line -> (line.startsWith("STATS ") || line.equals("RESET")) && answers.add(line))
                .keepOutput().readyWhen(HostileBrokerMain.READY, 180)
                .echo(line -> line.contains("dev.artemisrdma") && (line.contains(" WARN ") || line.contains(" ERROR ")))
                .start(host, Integer.toString(port), dataDir.toString(), acceptorQuery);
        System.out.println("hostile broker (pid " + process.pid() + ") ready");
        return new HostileBroker(process, answers);
    }

    long pid() {
        return process.pid();
    }

    Path log() {
        return process.log();
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
        process.send(command);
        String answer = answers.poll(60, TimeUnit.SECONDS);
        if (answer == null) {
            throw new IllegalStateException("the hostile broker did not answer '" + command + "' within 60 s; see "
                    + log());
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
        process.send("reset");
        if (answers.poll(60, TimeUnit.SECONDS) == null) {
            throw new IllegalStateException("the hostile broker did not answer 'reset'; see " + log());
        }
    }

    /** Waits (bounded) for a line of the broker's output that {@code matches}; returns it, or null. */
    String awaitLine(Predicate<String> matches, long timeoutMillis) throws InterruptedException {
        return process.awaitLine(matches, timeoutMillis);
    }

    /** A mark in the broker's output, to count the lines an attack made it write ({@link #linesSince}). */
    int outputMark() {
        return process.keptCount();
    }

    /** The broker's output lines since {@code mark} (its log: our transport at INFO, the rest at WARN). */
    List<String> linesSince(int mark) {
        return process.keptSince(mark);
    }

    @Override
    public void close() throws InterruptedException {
        process.closeInput(); // end of stdin: the broker exits
        if (!process.awaitExit(30)) {
            process.close();
        }
    }
}
