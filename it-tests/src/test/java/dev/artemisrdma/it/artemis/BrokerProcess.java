package dev.artemisrdma.it.artemis;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * {@link LabBrokerMain} (or another lab main, see {@link #startMain}) in a child JVM with this JVM's class path; its
 * output is echoed with a prefix.
 */
final class BrokerProcess implements AutoCloseable {

    private final Process process;
    private final CountDownLatch ready = new CountDownLatch(1);

    private BrokerProcess(Process process, String prefix, String readyLine) {
        this.process = process;
        Thread pump = new Thread(() -> {
            try (BufferedReader reader = new BufferedReader(new InputStreamReader(process.getInputStream(),
                    StandardCharsets.UTF_8))) {
                String line;
                while ((line = reader.readLine()) != null) {
                    System.out.println(prefix + line);
                    if (line.contains(readyLine)) {
                        ready.countDown();
                    }
                }
            } catch (IOException ignored) {
                // process gone
            }
        }, "broker-output");
        pump.setDaemon(true);
        pump.start();
    }

    static BrokerProcess start(String host, int port, Path dataDir) throws Exception {
        return startMain(LabBrokerMain.class, LabBrokerMain.READY, host, Integer.toString(port), dataDir.toString());
    }

    /** Runs {@code main} with {@code args}; returns once it printed {@code readyLine}. */
    static BrokerProcess startMain(Class<?> main, String readyLine, String... args) throws Exception {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-Xmx1g");
        command.add("-XX:TieredStopAtLevel=1");
        command.add("-Djava.io.tmpdir=" + System.getProperty("java.io.tmpdir"));
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(main.getName());
        command.addAll(List.of(args));
        BrokerProcess child = new BrokerProcess(new ProcessBuilder(command).redirectErrorStream(true).start(),
                "[" + main.getSimpleName() + "] ", readyLine);
        if (!child.ready.await(180, TimeUnit.SECONDS)) {
            child.close();
            throw new IllegalStateException(main.getSimpleName() + " process did not start within 180 s");
        }
        return child;
    }

    /** SIGKILL: no shutdown hook, no orderly disconnect; the kernel tears the process's RDMA resources down. */
    void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(30, TimeUnit.SECONDS);
    }

    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) {
            process.destroy();
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                kill();
            }
        }
    }
}
