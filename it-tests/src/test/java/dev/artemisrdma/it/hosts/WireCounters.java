package dev.artemisrdma.it.hosts;

import java.util.Map;
import java.util.TreeMap;

/**
 * One host's proof of traffic: the wire NIC's packet and byte counters ({@code /sys/class/net/wire0/statistics})
 * and rxe's hardware counters ({@code /sys/class/infiniband/rxe0/ports/1/hw_counters}): RoCE that crossed the wire
 * moves both, rxe's {@code sent_pkts} with the NIC's {@code tx_packets}; a fall-back to TCP would move only the NIC's.
 * rxe's fault counters say what the wire did to the packets and how rxe repaired it ({@code rcvd_seq_err},
 * {@code duplicate_request}, {@code out_of_seq_request}, {@code completer_retry_err}, {@code retry_exceeded_err}, the
 * RNR ones).
 */
public record WireCounters(String host, Map<String, Long> nic, Map<String, Long> rxe) {

    static final String SCRIPT = "for f in /sys/class/net/" + LabHost.WIRE_NIC + "/statistics/*; do "
            + "echo \"nic ${f##*/} $(cat $f)\"; done; for f in /sys/class/infiniband/" + LabHost.RDMA_DEVICE
            + "/ports/1/hw_counters/*; do echo \"rxe ${f##*/} $(cat $f)\"; done";

    /**
     * Packets that one side of a host has counted and the other not yet, when the counters are read while traffic
     * still flows (Artemis's pings, a closing session): the NIC counts a packet in before rxe does and rxe counts a
     * packet out before the NIC does, and one host's counters are read one file at a time. CI once read rxe 5
     * received packets ahead of the NIC. A fall-back to TCP or a loop inside one rxe leaves the NIC hundreds short.
     */
    static final long IN_FLIGHT_SLACK = 32;

    static WireCounters parse(String host, String text) {
        Map<String, Long> nic = new TreeMap<>();
        Map<String, Long> rxe = new TreeMap<>();
        for (String line : text.split("\n")) {
            String[] f = line.trim().split(" ");
            if (f.length == 3 && f[2].matches("\\d+")) {
                (f[0].equals("nic") ? nic : rxe).put(f[1], Long.parseLong(f[2]));
            }
        }
        if (!nic.containsKey("tx_packets") || !rxe.containsKey("sent_pkts")) {
            throw new IllegalStateException("host " + host + ": no " + LabHost.WIRE_NIC + " tx_packets or "
                    + LabHost.RDMA_DEVICE + " sent_pkts among: " + text);
        }
        return new WireCounters(host, Map.copyOf(nic), Map.copyOf(rxe));
    }

    /** What moved since {@code before}. */
    public WireCounters since(WireCounters before) {
        Map<String, Long> nicDelta = new TreeMap<>();
        nic.forEach((k, v) -> nicDelta.put(k, v - before.nic.getOrDefault(k, 0L)));
        Map<String, Long> rxeDelta = new TreeMap<>();
        rxe.forEach((k, v) -> rxeDelta.put(k, v - before.rxe.getOrDefault(k, 0L)));
        return new WireCounters(host, nicDelta, rxeDelta);
    }

    public long nic(String name) {
        return nic.getOrDefault(name, 0L);
    }

    public long rxe(String name) {
        return rxe.getOrDefault(name, 0L);
    }

    /** The RNR counters summed (a SEND that found no receive posted). */
    public long rnr() {
        return rxe.entrySet().stream().filter(e -> e.getKey().contains("rnr")).mapToLong(Map.Entry::getValue).sum();
    }

    /**
     * Fails unless RoCE crossed the wire in both directions: rxe sent and received at least {@code minPackets}
     * packets, and the NIC carried at least as many (its count also holds ARP and neighbour discovery).
     */
    public void requireRoceCrossedTheWire(long minPackets) {
        requireRoceCrossedTheWire(minPackets, 0);
    }

    /**
     * As {@link #requireRoceCrossedTheWire(long)} on a wire that drops packets on purpose ({@code tc netem} sits
     * before the NIC's counters on the way out, and the other host's netem drops before ours count them on the way
     * in): the NIC may carry up to {@code dropAllowance} (a fraction) fewer packets than rxe. Both checks allow
     * {@link #IN_FLIGHT_SLACK} packets counted on one side and not yet on the other.
     */
    public void requireRoceCrossedTheWire(long minPackets, double dropAllowance) {
        long sent = rxe("sent_pkts");
        long received = rxe("rcvd_pkts");
        if (sent < minPackets || received < minPackets) {
            throw new AssertionError("host " + host + ": rxe sent " + sent + " and received " + received
                    + " packets, fewer than " + minPackets + ": the traffic did not go over RDMA (" + this + ")");
        }
        if (nic("tx_packets") < sent * (1 - dropAllowance) - IN_FLIGHT_SLACK
                || nic("rx_packets") < received * (1 - dropAllowance) - IN_FLIGHT_SLACK) {
            throw new AssertionError("host " + host + ": the wire NIC sent " + nic("tx_packets") + " and received "
                    + nic("rx_packets") + " packets, fewer than rxe's " + sent + "/" + received
                    + ": rxe's packets did not cross the wire (" + this + ")");
        }
    }

    /** The counters that moved, for a test's report. */
    public String summary() {
        Map<String, Long> moved = new TreeMap<>();
        nic.forEach((k, v) -> {
            if (v != 0 && (k.endsWith("packets") || k.endsWith("bytes") || k.endsWith("dropped"))) {
                moved.put("nic." + k, v);
            }
        });
        rxe.forEach((k, v) -> {
            if (v != 0) {
                moved.put("rxe." + k, v);
            }
        });
        return "host " + host + " " + moved;
    }
}
