package dev.artemisrdma.it;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

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

    private static String run(String... command) {
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
