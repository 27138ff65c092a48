package dev.artemisrdma.it;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * Every hardware counter of every RDMA port ({@code /sys/class/infiniband/DEV/ports/N/hw_counters/NAME}), summed
 * by name over devices and ports. rxe keeps, among others, {@code sent_pkts}, {@code rcvd_pkts} and the RNR
 * counters {@code rcvd_rnr_err}, {@code send_rnr_err} and {@code retry_rnr_exceeded_err}: a SEND that found no
 * posted receive moves them (or, with rnr_retry_count 0, fails the queue pair).
 */
public record RxeHwCounters(Map<String, Long> values) {

    private static final Path DEVICES = Path.of("/sys/class/infiniband");

    public static RxeHwCounters now() throws IOException {
        if (!Files.isDirectory(DEVICES)) {
            throw new IllegalStateException(DEVICES + " does not exist: no RDMA device (run inside the lab)");
        }
        Map<String, Long> sums = new TreeMap<>();
        try (Stream<Path> devices = Files.list(DEVICES)) {
            for (Path device : devices.toList()) {
                try (Stream<Path> ports = Files.list(device.resolve("ports"))) {
                    for (Path port : ports.toList()) {
                        Path dir = port.resolve("hw_counters");
                        if (!Files.isDirectory(dir)) {
                            continue;
                        }
                        try (Stream<Path> counters = Files.list(dir)) {
                            for (Path counter : counters.toList()) {
                                String text = Files.readString(counter).strip();
                                if (text.matches("\\d+")) {
                                    sums.merge(counter.getFileName().toString(), Long.parseLong(text), Long::sum);
                                }
                            }
                        }
                    }
                }
            }
        }
        if (!sums.containsKey("sent_pkts")) {
            throw new IllegalStateException("no RDMA port under " + DEVICES + " has hw_counters/sent_pkts: " + sums);
        }
        return new RxeHwCounters(Map.copyOf(sums));
    }

    /** What moved since {@code before}, by name. */
    public RxeHwCounters since(RxeHwCounters before) {
        Map<String, Long> delta = new TreeMap<>();
        values.forEach((name, v) -> delta.put(name, v - before.values.getOrDefault(name, 0L)));
        return new RxeHwCounters(delta);
    }

    /** The counters whose names say RNR (receiver not ready); fails when the devices have none. */
    public Map<String, Long> rnr() {
        Map<String, Long> rnr = new TreeMap<>();
        values.forEach((name, v) -> {
            if (name.contains("rnr")) {
                rnr.put(name, v);
            }
        });
        if (rnr.isEmpty()) {
            throw new IllegalStateException("the RDMA devices have no RNR counter among " + values.keySet());
        }
        return rnr;
    }

    public long get(String name) {
        Long v = values.get(name);
        if (v == null) {
            throw new IllegalStateException("no hw counter " + name + " among " + values.keySet());
        }
        return v;
    }

    /** The counters that are not zero, by name. */
    public Map<String, Long> nonZero() {
        Map<String, Long> out = new TreeMap<>();
        values.forEach((name, v) -> {
            if (v != 0) {
                out.put(name, v);
            }
        });
        return out;
    }
}
