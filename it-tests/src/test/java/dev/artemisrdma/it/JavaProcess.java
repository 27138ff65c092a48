package dev.artemisrdma.it;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

import dev.artemisrdma.it.hosts.LabHost;
import dev.artemisrdma.it.hosts.RemoteProcess;

/**
 * The one launcher of child JVMs for the lab tests and benchmarks: this JVM's {@code java}, class path and
 * {@code java.io.tmpdir} unless told otherwise, stderr merged into stdout, and every output line read by one pump
 * thread (its only owner) which, in this order, writes it to the {@link Builder#log log file}, offers it to the
 * {@link Builder#intercept interceptor} (a line it takes goes no further), {@link Builder#keepOutput keeps} it,
 * {@link Builder#queueLines queues} it for {@link #await}, checks it for the {@link Builder#readyWhen ready text}
 * and {@link Builder#echo echoes} it with a {@code [name] } prefix. The caller's thread owns the process: commands
 * go to its stdin ({@link #send}), and {@link #close} ends it (SIGTERM, then SIGKILL after 30 s). In the two-host lab
 * {@link Builder#on} starts it on host B instead, through B's process agent, with the same handling.
 *
 * <pre>{@code
 * try (JavaProcess broker = JavaProcess.main(LabBrokerMain.class).jvm("-Xmx1g")
 *         .readyWhen(LabBrokerMain.READY, 180).echo(line -> true).start(host, port, dir)) { ... }
 * }</pre>
 */
public final class JavaProcess implements AutoCloseable {

    /** What {@link Builder#queueLines} queues when the output ends. */
    private static final String EOF = "\u0000EOF";
    /** How many of the last output lines a failure message quotes when the process ended unexpectedly. */
    private static final int TAIL_LINES = 30;
    /** The JVM's fatal error report, when it wrote one: HotSpot replaces {@code %p} by the pid. */
    private static final String ERROR_FILE = "hs_err-%s-pid%%p.log";

    private final String name;
    private final Process process;
    private final PrintWriter stdin;
    private final Path log;
    private final List<String> kept = new CopyOnWriteArrayList<>();
    /** The last {@link #TAIL_LINES} lines, whatever the builder keeps: what a failure message quotes. */
    private final ArrayDeque<String> tail = new ArrayDeque<>();
    private final Path errorFile;
    /** When it started (this machine's clock): a fatal error report older than that is another process's. */
    private final long started = System.currentTimeMillis();
    private final BlockingQueue<String> queue = new LinkedBlockingQueue<>();
    private final CountDownLatch ready = new CountDownLatch(1);
    private final CountDownLatch ended = new CountDownLatch(1);
    private volatile boolean readySeen;

    private JavaProcess(Builder b, Process process) throws IOException {
        this.name = b.name;
        this.process = process;
        this.log = b.log;
        this.errorFile = b.errorFile();
        this.stdin = new PrintWriter(new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8), true);
        Writer file = b.log == null ? null : Files.newBufferedWriter(b.log, StandardCharsets.UTF_8,
                StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                b.appendLog ? StandardOpenOption.APPEND : StandardOpenOption.TRUNCATE_EXISTING);
        Thread pump = new Thread(() -> pump(b, file), name + "-output");
        pump.setDaemon(true);
        pump.start();
    }

    /** A child JVM running {@code main} of this class path; its name (thread, echo prefix, errors) is the class's. */
    public static Builder main(Class<?> main) {
        return new Builder(main.getSimpleName()).mainClass(main.getName());
    }

    /** A child JVM with no main class or module unless {@link Builder#module} names one ({@code --list-modules}). */
    public static Builder java(String name) {
        return new Builder(name);
    }

    /**
     * A lab main driven by lines (commands to its stdin, answers awaited with {@link #await}), as the benchmarks run
     * their brokers and clients: its whole output in {@code NAME.log} in the {@link #resultsDir results folder}, its
     * lines queued, the first 20 errors echoed; logging at warn.
     */
    public static Builder driven(String name, Class<?> main) {
        return main(main).name(name).property("org.slf4j.simpleLogger.defaultLogLevel", "warn")
                .log(resultsDir().resolve(name + ".log"), false).queueLines()
                .echo(line -> line.startsWith("FAILED") || line.contains("ERROR"), 20);
    }

    /** Where child JVMs' logs go: {@code $RDMA_LAB_RESULTS} in the lab, else {@code java.io.tmpdir}. */
    public static Path resultsDir() {
        String results = System.getenv("RDMA_LAB_RESULTS");
        return Path.of(results == null || results.isEmpty() ? System.getProperty("java.io.tmpdir") : results);
    }

    private void pump(Builder b, Writer file) {
        int echoed = 0;
        try (BufferedReader reader = new BufferedReader(new InputStreamReader(process.getInputStream(),
                StandardCharsets.UTF_8))) {
            String line;
            while ((line = reader.readLine()) != null) {
                if (file != null) {
                    file.write(line);
                    file.write('\n');
                    file.flush();
                }
                synchronized (tail) {
                    if (tail.size() == TAIL_LINES) {
                        tail.removeFirst();
                    }
                    tail.addLast(line);
                }
                if (b.intercept != null && b.intercept.test(line)) {
                    continue;
                }
                if (b.keepOutput) {
                    kept.add(line);
                }
                if (b.queueLines) {
                    queue.add(line);
                }
                if (b.readyText != null && line.contains(b.readyText)) {
                    readySeen = true;
                    ready.countDown();
                }
                if (b.echo != null && b.echo.test(line) && echoed < b.echoAtMost) {
                    echoed++;
                    System.out.println("[" + name + "] " + line);
                }
            }
        } catch (IOException ignored) {
            // process gone
        } finally {
            if (file != null) {
                try {
                    file.close();
                } catch (IOException ignored) {
                    // the log is best effort
                }
            }
            queue.add(EOF);
            ended.countDown();
            ready.countDown();
        }
    }

    public String name() {
        return name;
    }

    public long pid() {
        return process.pid();
    }

    /** The log file, or null when there is none. */
    public Path log() {
        return log;
    }

    /** Writes {@code command} and a newline to the process's stdin. */
    public void send(String command) {
        stdin.println(command);
    }

    /** Closes the process's stdin: a child that reads commands sees the end of its input. */
    public void closeInput() {
        stdin.close();
    }

    /**
     * With {@link Builder#queueLines}: the next queued line starting with {@code prefix}; fails on timeout, when the
     * process ended first, or on a line starting with {@code FAILED} (the lab mains' way to report a failure).
     */
    public String await(String prefix, long timeoutSeconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
        while (true) {
            long left = deadline - System.nanoTime();
            String line = left <= 0 ? null : queue.poll(left, TimeUnit.NANOSECONDS);
            if (line == null) {
                throw new IllegalStateException(name + ": no '" + prefix + "' line within " + timeoutSeconds + " s");
            }
            if (line.equals(EOF)) {
                queue.add(EOF);
                throw new IllegalStateException(name + " exited (code " + exitCode() + ") before printing '"
                        + prefix + "'" + lastWords());
            }
            if (line.startsWith("FAILED")) {
                throw new IllegalStateException(name + ": " + line);
            }
            if (line.startsWith(prefix)) {
                return line;
            }
        }
    }

    /** With {@link Builder#keepOutput}: waits (bounded) for a kept line that {@code matches}; returns it, or null. */
    public String awaitLine(Predicate<String> matches, long timeoutMillis) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMillis;
        while (true) {
            for (String line : kept) {
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

    /** With {@link Builder#keepOutput}: the lines kept from the {@code from}-th on (a count taken earlier). */
    public List<String> keptSince(int from) {
        List<String> all = List.copyOf(kept);
        return all.subList(Math.min(from, all.size()), all.size());
    }

    /** With {@link Builder#keepOutput}: how many lines were kept so far (a mark for {@link #keptSince}). */
    public int keptCount() {
        return kept.size();
    }

    /** With {@link Builder#keepOutput}: every kept line so far, each ended by a newline (all of it once exited). */
    public String output() throws InterruptedException {
        if (!process.isAlive()) {
            ended.await(10, TimeUnit.SECONDS); // the pump reads what is left in the pipe
        }
        StringBuilder out = new StringBuilder();
        for (String line : kept) {
            out.append(line).append('\n');
        }
        return out.toString();
    }

    /** Waits for the process to end by itself; true when it did within {@code timeoutSeconds}. */
    public boolean awaitExit(long timeoutSeconds) throws InterruptedException {
        return process.waitFor(timeoutSeconds, TimeUnit.SECONDS);
    }

    /** As {@link #awaitExit}, and SIGKILL when it did not end in time. True when it ended by itself. */
    public boolean awaitExitOrKill(long timeoutSeconds) throws InterruptedException {
        if (awaitExit(timeoutSeconds)) {
            return true;
        }
        kill();
        return false;
    }

    /** The exit code; the process must have ended. */
    public int exitValue() {
        return process.exitValue();
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    /**
     * Sends {@code signal} ({@code STOP}, {@code CONT}, ...) to the process with {@code kill(1)}: SIGSTOP makes a peer
     * whose connections stay up (the kernel still acknowledges) while it takes nothing.
     */
    public void signal(String signal) throws IOException, InterruptedException {
        if (process instanceof RemoteProcess remote) {
            remote.signal(signal);
            return;
        }
        Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(pid())).inheritIO().start();
        if (kill.waitFor() != 0) {
            throw new IllegalStateException("kill -" + signal + " " + pid() + " failed with " + kill.exitValue());
        }
    }

    /** SIGKILL: no shutdown hook, no orderly disconnect; the kernel tears the process's RDMA resources down. */
    public void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(30, TimeUnit.SECONDS);
    }

    /** SIGTERM, then SIGKILL when it has not ended 30 s later. */
    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) {
            process.destroy();
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                kill();
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

    /**
     * What a process that ended unexpectedly said last: its last output lines and, when the JVM crashed (exit code
     * 134: HotSpot's fatal error handler or glibc's abort), the head of its fatal error report (the signal, the
     * problematic frame, the thread and its Java frames). CI keeps only its own output, not the lab's files.
     */
    private String lastWords() {
        try {
            ended.await(10, TimeUnit.SECONDS); // the pump reads what is left in the pipe
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        // the report first: CI's summary of a failure keeps a message's beginning
        StringBuilder out = new StringBuilder(FatalErrorReport.summary(errorFile, started));
        synchronized (tail) {
            out.append("; its last ").append(tail.size()).append(" lines:");
            tail.forEach(line -> out.append("\n  | ").append(line));
        }
        return out.toString();
    }

    private void awaitReady(long seconds) throws InterruptedException {
        boolean inTime = ready.await(seconds, TimeUnit.SECONDS);
        if (readySeen) {
            return;
        }
        String where = log == null ? "" : "; log: " + log;
        close();
        throw new IllegalStateException(inTime ? name + " exited (code " + exitCode() + ") before it was ready" + where
                + lastWords() : name + " did not start within " + seconds + " s" + where);
    }

    /** What to launch and what to do with its output; one builder may {@link #start} the same JVM again. */
    public static final class Builder {
        private String name;
        private String mainClass;
        private String module;
        private final List<String> wrapper = new ArrayList<>();
        private final List<String> jvmOptions = new ArrayList<>();
        private final Map<String, String> properties = new LinkedHashMap<>();
        private String classPath = System.getProperty("java.class.path");
        private Path log;
        private boolean appendLog;
        private Predicate<String> intercept;
        private boolean keepOutput;
        private boolean queueLines;
        private String readyText;
        private long readySeconds;
        private Predicate<String> echo;
        private int echoAtMost = Integer.MAX_VALUE;
        private LabHost host;

        private Builder(String name) {
            this.name = name;
            properties.put("java.io.tmpdir", System.getProperty("java.io.tmpdir"));
        }

        private Builder mainClass(String main) {
            this.mainClass = main;
            return this;
        }

        /**
         * Runs the JVM on {@code host} of the two-host lab (host A: here, as without this call), with the same
         * {@code java}, class path and options: every lab host sees this machine's files at the same paths.
         */
        public Builder on(LabHost host) {
            this.host = host;
            return this;
        }

        /** The name in the pump thread's name, the echo prefix and error messages. */
        public Builder name(String name) {
            this.name = name;
            return this;
        }

        /** {@code -m module/class} instead of a main class. */
        public Builder module(String moduleAndClass) {
            this.module = moduleAndClass;
            this.mainClass = null;
            return this;
        }

        /** A command the {@code java} command runs under, e.g. {@code prlimit ... setpriv ...}. */
        public Builder wrapper(String... command) {
            wrapper.addAll(List.of(command));
            return this;
        }

        /** JVM options ({@code -Xmx1g}, {@code --module-path ...}), before the system properties. */
        public Builder jvm(String... options) {
            return jvm(List.of(options));
        }

        public Builder jvm(List<String> options) {
            jvmOptions.addAll(options);
            return this;
        }

        /** {@code -Dkey=value}; {@code java.io.tmpdir} is this JVM's unless set here. */
        public Builder property(String key, String value) {
            properties.put(key, value);
            return this;
        }

        /** The class path (this JVM's by default); null for none. */
        public Builder classPath(String classPath) {
            this.classPath = classPath;
            return this;
        }

        /** Puts {@code prefix} (may be null: nothing) before the class path. */
        public Builder classPathFirst(String prefix) {
            if (prefix != null) {
                classPath = classPath == null ? prefix : prefix + java.io.File.pathSeparator + classPath;
            }
            return this;
        }

        /**
         * Writes every output line to {@code file}: emptied first, or with {@code append} after what it already holds
         * (a restarted process).
         */
        public Builder log(Path file, boolean append) {
            this.log = file;
            this.appendLog = append;
            return this;
        }

        /** Offers each line to {@code handler} first (after the log): a line it returns true for goes no further. */
        public Builder intercept(Predicate<String> handler) {
            this.intercept = handler;
            return this;
        }

        /** Keeps every line, for {@link JavaProcess#output} and {@link JavaProcess#awaitLine}. */
        public Builder keepOutput() {
            this.keepOutput = true;
            return this;
        }

        /** Queues every line for {@link JavaProcess#await}. */
        public Builder queueLines() {
            this.queueLines = true;
            return this;
        }

        /** {@link #start} returns once a line contains {@code text}; fails (ending it) after {@code seconds}. */
        public Builder readyWhen(String text, long seconds) {
            this.readyText = text;
            this.readySeconds = seconds;
            return this;
        }

        /** Prints the lines that match to this JVM's stdout, prefixed {@code [name] }. */
        public Builder echo(Predicate<String> which) {
            return echo(which, Integer.MAX_VALUE);
        }

        /** As {@link #echo(Predicate)}, the first {@code atMost} of them (the lab's serial console is slow). */
        public Builder echo(Predicate<String> which, int atMost) {
            this.echo = which;
            this.echoAtMost = atMost;
            return this;
        }

        /**
         * Where the JVM writes its fatal error report if it crashes: the {@link #resultsDir results folder}, which
         * both lab hosts see at the same path, named after the process ({@code %p}: its pid). HotSpot's default, the
         * working directory, is lost with the lab.
         */
        Path errorFile() {
            return resultsDir().resolve(String.format(ERROR_FILE, name.replaceAll("[^A-Za-z0-9._-]", "_")));
        }

        /** The command line {@link #start} runs, with {@code args} after the main class or module. */
        public List<String> command(String... args) {
            List<String> command = new ArrayList<>(wrapper);
            command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
            if (jvmOptions.stream().noneMatch(o -> o.startsWith("-XX:ErrorFile="))) {
                command.add("-XX:ErrorFile=" + errorFile());
            }
            command.addAll(jvmOptions);
            properties.forEach((k, v) -> command.add("-D" + k + "=" + v));
            if (classPath != null) {
                command.add("-cp");
                command.add(classPath);
            }
            if (module != null) {
                command.add("-m");
                command.add(module);
            } else if (mainClass != null) {
                command.add(mainClass);
            }
            command.addAll(List.of(args));
            return command;
        }

        public JavaProcess start(List<String> args) throws IOException, InterruptedException {
            return start(args.toArray(String[]::new));
        }

        /** Starts the JVM with {@code args}; with {@link #readyWhen}, returns once it is ready. */
        public JavaProcess start(String... args) throws IOException, InterruptedException {
            // glibc's fatal messages (heap corruption before its abort) to stderr, which is merged into the output,
            // rather than to the controlling terminal, which the lab's processes do not have
            Map<String, String> env = Map.of("LIBC_FATAL_STDERR_", "1");
            Process process;
            if (host == null || host.isLocal()) {
                ProcessBuilder pb = new ProcessBuilder(command(args)).redirectErrorStream(true);
                pb.environment().putAll(env);
                process = pb.start();
            } else {
                process = host.start(command(args), env, System.getProperty("user.dir"));
            }
            JavaProcess child = new JavaProcess(this, process);
            if (readyText != null) {
                child.awaitReady(readySeconds);
            }
            return child;
        }
    }
}
