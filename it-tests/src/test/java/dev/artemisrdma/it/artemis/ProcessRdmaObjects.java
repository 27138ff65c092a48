package dev.artemisrdma.it.artemis;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The RDMA kernel objects one process owns, as {@code rdma resource show <type>} lists them (one line per object,
 * each with {@code pid N}): counts of pd, cq, qp, cm_id and mr, and the bytes its memory regions pin (the sum of
 * their {@code mrlen}). The kernel's account, so neither a leak nor registered memory can hide behind ours.
 */
record ProcessRdmaObjects(Map<String, Integer> counts, long registeredBytes) {

    private static final String[] TYPES = {"pd", "cq", "qp", "cm_id", "mr"};
    private static final Pattern MRLEN = Pattern.compile("\\bmrlen (\\d+)\\b");

    static ProcessRdmaObjects of(long pid) {
        Pattern owner = Pattern.compile("\\bpid " + pid + "\\b");
        Map<String, Integer> counts = new TreeMap<>();
        long bytes = 0;
        for (String type : TYPES) {
            int n = 0;
            for (String line : run("rdma", "resource", "show", type).split("\n")) {
                if (!owner.matcher(line).find()) {
                    continue;
                }
                n++;
                if (type.equals("mr")) {
                    Matcher m = MRLEN.matcher(line);
                    if (!m.find()) {
                        throw new IllegalStateException("'rdma resource show mr' printed no mrlen: " + line);
                    }
                    bytes += Long.parseLong(m.group(1));
                }
            }
            counts.put(type, n);
        }
        return new ProcessRdmaObjects(counts, bytes);
    }

    /** The objects a connection owns (qp, cm_id, cq) and the protection domains; memory regions are compared apart. */
    Map<String, Integer> connectionObjects() {
        Map<String, Integer> objects = new TreeMap<>(counts);
        objects.remove("mr");
        return objects;
    }

    int memoryRegions() {
        return counts.get("mr");
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
        return counts + ", " + registeredBytes + " bytes registered";
    }
}
