package dev.artemisrdma.it.pairs;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.artemisrdma.it.hosts.LabHost;
import dev.artemisrdma.it.hosts.WireCounters;

/**
 * The proof that a broker pair's links crossed the two-host lab's wire, from both hosts' counters read around a
 * scenario whose second broker ran on host B ({@link LabHost}, {@link WireCounters}). Host B talks only across the
 * wire (its broker's links to host A's broker and to this JVM's clients; the test harness's own TCP runs on the
 * management link), so B's rxe counters, carried by B's NIC, prove the crossing; host A's rxe also counts what this
 * JVM's clients exchange with A's broker, which loops back inside A.
 */
final class PairCrossing {

    /**
     * The fewest bytes one of the pair scenarios' messages takes on a link, as a Core packet: its address and its text
     * body ("order N") in SimpleString's two bytes a character (26 and 14 bytes at least, each with its length), its
     * {@code seq} property (name, type and int), its message ID, timestamp and expiration (8 bytes each) and the
     * packet's own header (13 bytes) come to about 110; the bridge and the cluster add their duplicate-detection and
     * routing properties. Packed several to a SEND or not, that many bytes cross per message.
     */
    static final long MIN_MESSAGE_BYTES = 100;
    /** The most payload one RoCE packet carries on the lab's wire (wire0's MTU 9000 gives RoCE MTU 4096). */
    private static final long ROCE_MTU = 4096;

    private final WireCounters a0;
    private final WireCounters b0;

    private PairCrossing(WireCounters a0, WireCounters b0) {
        this.a0 = a0;
        this.b0 = b0;
    }

    /** Reads both hosts' counters before the scenario. */
    static PairCrossing start() throws Exception {
        return new PairCrossing(LabHost.a().counters(), LabHost.b().counters());
    }

    /**
     * Fails unless, since {@link #start}, every one of the scenario's {@code messagesEachWay} messages could have
     * crossed the wire in each direction over RoCE: each host's NIC sent and received at least
     * {@code messagesEachWay} x {@link #MIN_MESSAGE_BYTES} bytes, host B's rxe sent and received at least the packets
     * those bytes need at RoCE MTU 4096 with its NIC carrying them ({@link #requireCrossed}), host A's rxe sent every
     * packet B's rxe received and received at least as many as B's needed. Prints both hosts' counters.
     */
    void requireMessagesCrossed(String label, long messagesEachWay) throws Exception {
        WireCounters a = LabHost.a().counters().since(a0);
        WireCounters b = LabHost.b().counters().since(b0);
        System.out.printf("[%s] crossing: %s; %s%n", label, a.summary(), b.summary());
        long bytes = messagesEachWay * MIN_MESSAGE_BYTES;
        long packets = (bytes + ROCE_MTU - 1) / ROCE_MTU;
        requireCrossed(a, b, packets);
        for (WireCounters side : new WireCounters[] {a, b}) {
            for (String counter : new String[] {"tx_bytes", "rx_bytes"}) {
                assertTrue(side.nic(counter) >= bytes, "[" + label + "] host " + side.host() + "'s NIC " + counter
                        + " " + side.nic(counter) + ": fewer than the " + bytes + " bytes that " + messagesEachWay
                        + " messages each way need (" + side.summary() + ")");
            }
        }
        // every RoCE packet on the wire comes from one of the two rxe devices
        assertTrue(a.rxe("sent_pkts") >= b.rxe("rcvd_pkts"), "[" + label + "] host A's rxe did not send what host B's"
                + " rxe received: " + a.summary() + "; " + b.summary());
        assertTrue(a.rxe("rcvd_pkts") >= packets, "[" + label + "] host A's rxe received " + a.rxe("rcvd_pkts")
                + " packets, fewer than " + packets + ": " + a.summary());
    }

    /**
     * Host B's RoCE crossed the wire both ways ({@link WireCounters#requireRoceCrossedTheWire}, at least
     * {@code minPackets}), and host A's NIC sent at least what host B's rxe received (the cable only loses: under load
     * it drops some of the hosts' packets on the machine's loopback, which rxe repairs).
     */
    static void requireCrossed(WireCounters a, WireCounters b, long minPackets) {
        b.requireRoceCrossedTheWire(minPackets);
        assertTrue(a.nic("tx_packets") >= b.rxe("rcvd_pkts"),
                "host A's NIC did not send what host B's rxe received: " + a.summary() + "; " + b.summary());
        System.out.printf("the cable delivered %d of host B's %d packets to host A, %d of A's %d to B%n",
                a.nic("rx_packets"), b.nic("tx_packets"), b.nic("rx_packets"), a.nic("tx_packets"));
    }
}
