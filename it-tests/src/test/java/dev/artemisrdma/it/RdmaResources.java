package dev.artemisrdma.it;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import dev.artemisrdma.transport.RawPeer;

/**
 * Live RDMA kernel objects (pd, cq, qp, cm_id, mr...) summed over all devices, as `rdma resource show` lists
 * them: the kernel's own account, so a leak cannot hide behind our bookkeeping.
 */
public record RdmaResources(Map<String, Integer> counts) {

    private static final Pattern COUNT = Pattern.compile("\\b([a-z_]+) (\\d+)\\b");

    public static RdmaResources now() {
        String out = run("rdma", "resource", "show");
        Map<String, Integer> counts = new TreeMap<>();
        for (String line : out.split("\n")) {
            int colon = line.indexOf(':', line.indexOf(':') + 1);
            if (colon < 0) {
                continue;
            }
            Matcher m = COUNT.matcher(line.substring(colon + 1));
            while (m.find()) {
                counts.merge(m.group(1), Integer.parseInt(m.group(2)), Integer::sum);
            }
        }
        if (counts.isEmpty()) {
            throw new IllegalStateException("'rdma resource show' listed nothing: " + out);
        }
        return new RdmaResources(counts);
    }

    /**
     * The counts once librdmacm's per-process state exists. librdmacm opens every device context on first use and
     * keeps them (and, as measured in the lab, a protection domain of the first device it connected on) until the
     * process exits; a baseline taken before that would blame the first connection of a JVM for them.
     */
    public static RdmaResources afterWarmUp() throws Exception {
        return afterWarmUp(Lab.addr1());
    }

    /**
     * {@link #afterWarmUp()} with a connection to each of {@code listenAddresses}: a test whose clients reach
     * brokers on both lab devices warms librdmacm up on both.
     */
    public static RdmaResources afterWarmUp(String... listenAddresses) throws Exception {
        for (String listenAddress : listenAddresses) {
            warmUp(listenAddress);
        }
        return now();
    }

    private static void warmUp(String listenAddress) throws Exception {
        try (dev.artemisrdma.transport.verbs.VerbsFabric fabric = new dev.artemisrdma.transport.verbs.VerbsFabric()) {
            RawPeer server = new RawPeer(2, 1, 0);
            RawPeer client = new RawPeer(2, 1, 0);
            dev.artemisrdma.transport.fabric.FabricListener listener = fabric.listen(
                    Lab.address(listenAddress, Lab.freshPort()), request -> {
                        try {
                            request.accept(server, new byte[0], 7, server);
                        } catch (dev.artemisrdma.transport.fabric.FabricException e) {
                            throw new IllegalStateException(e);
                        }
                    });
            fabric.connect(listener.localAddress(), client, new dev.artemisrdma.transport.fabric.ConnectOptions(
                    new byte[0], 7, 7, java.time.Duration.ofSeconds(20)), client);
            client.close();
            server.disconnected.await(10, java.util.concurrent.TimeUnit.SECONDS);
            server.close();
            listener.close();
        }
    }

    /** Waits (bounded) until the counts equal {@code expected}; returns the last reading. */
    public static RdmaResources awaitEqual(RdmaResources expected, long timeoutMillis) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMillis;
        RdmaResources now = now();
        while (!now.equals(expected) && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
            now = now();
        }
        return now;
    }

    /** Runs a command of the lab (iproute2's rdma, ip ...) and returns its output; fails when it fails. */
    public static String run(String... command) {
        try {
            Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
                throw new IllegalStateException(String.join(" ", command) + " failed: " + out);
            }
            return out;
        } catch (IOException e) {
            throw new IllegalStateException("cannot run " + String.join(" ", command) + " (iproute2 installed?)", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    @Override
    public String toString() {
        return counts.toString();
    }
}
