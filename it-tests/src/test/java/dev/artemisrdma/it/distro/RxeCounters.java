package dev.artemisrdma.it.distro;

import dev.artemisrdma.it.RxeHwCounters;
import java.io.IOException;

/**
 * Packets the RDMA devices sent and received, summed over every device and port ({@code sent_pkts} and
 * {@code rcvd_pkts} of {@link RxeHwCounters}). TCP traffic never moves them, so a client that silently fell back to
 * TCP shows up here.
 */
public record RxeCounters(long sentPackets, long receivedPackets) {

    public static RxeCounters now() throws IOException {
        RxeHwCounters all = RxeHwCounters.now();
        return new RxeCounters(all.get("sent_pkts"), all.get("rcvd_pkts"));
    }

    public RxeCounters since(RxeCounters before) {
        return new RxeCounters(sentPackets - before.sentPackets, receivedPackets - before.receivedPackets);
    }

    @Override
    public String toString() {
        return sentPackets + " packets sent, " + receivedPackets + " received";
    }
}
