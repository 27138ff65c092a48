package dev.artemisrdma.it.distro;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;

/**
 * Packets the RDMA devices sent and received, summed over every device and port, from the kernel's hardware
 * counters ({@code /sys/class/infiniband/DEV/ports/N/hw_counters}; rxe keeps {@code sent_pkts} and
 * {@code rcvd_pkts}). TCP traffic never moves them, so a client that silently fell back to TCP shows up here.
 */
public record RxeCounters(long sentPackets, long receivedPackets) {

    private static final Path DEVICES = Path.of("/sys/class/infiniband");

    public static RxeCounters now() throws IOException {
        if (!Files.isDirectory(DEVICES)) {
            throw new IllegalStateException(DEVICES + " does not exist: no RDMA device (run inside the lab)");
        }
        long sent = 0;
        long received = 0;
        int ports = 0;
        try (Stream<Path> devices = Files.list(DEVICES)) {
            for (Path device : devices.toList()) {
                try (Stream<Path> portDirs = Files.list(device.resolve("ports"))) {
                    for (Path port : portDirs.toList()) {
                        Path counters = port.resolve("hw_counters");
                        if (Files.isRegularFile(counters.resolve("sent_pkts"))) {
                            sent += read(counters.resolve("sent_pkts"));
                            received += read(counters.resolve("rcvd_pkts"));
                            ports++;
                        }
                    }
                }
            }
        }
        if (ports == 0) {
            throw new IllegalStateException("no RDMA port under " + DEVICES + " has hw_counters/sent_pkts");
        }
        return new RxeCounters(sent, received);
    }

    public RxeCounters since(RxeCounters before) {
        return new RxeCounters(sentPackets - before.sentPackets, receivedPackets - before.receivedPackets);
    }

    private static long read(Path file) throws IOException {
        return Long.parseLong(Files.readString(file).strip());
    }

    @Override
    public String toString() {
        return sentPackets + " packets sent, " + receivedPackets + " received";
    }
}
