package dev.artemisrdma.it.pairs;

import dev.artemisrdma.it.hosts.LabHost;
import dev.artemisrdma.it.hosts.WireCounters;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.TimeUnit;

/**
 * {@link PairsReplicationLabTest}'s replication scenario with the primary on host A and the backup on host B of the
 * two-host lab: the initial sync (durable, large and paged messages) and the live replication cross the wire, the
 * primary is SIGKILLed under a transacted producer, the client on A fails over to the backup on B exactly once, the
 * primary comes back and takes over again, and every committed message is there once. Both hosts' counters prove
 * that the replication link crossed the wire over RoCE.
 */
@Timeout(value = 900, unit = TimeUnit.SECONDS)
class CrossWireReplicationLabTest {

    @Test
    void aPrimaryOnAReplicatesAcrossTheWireToABackupOnBThatTakesOverExactlyOnce() throws Exception {
        LabHost.requireTwoHosts();
        WireCounters a0 = LabHost.a().counters();
        WireCounters b0 = LabHost.b().counters();
        long failoverMillis = new PairsReplicationLabTest().run(false, null, LabHost.a().wireAddress(),
                LabHost.b().wireAddress(), LabHost.b());
        WireCounters a = LabHost.a().counters().since(a0);
        WireCounters b = LabHost.b().counters().since(b0);
        System.out.printf("FAILOVER across the wire: client without a broker for %d ms; %s; %s%n", failoverMillis,
                a.summary(), b.summary());
        // B talks only across the wire (its backup to the primary, the client to it after the failover), while A's
        // rxe also counts the client's own connection to the primary, which loops back inside A: so B's rxe proves
        // the crossing, and A's NIC must have sent at least what B's rxe received (the cable only loses: under this
        // load it drops some of B's packets on the host's loopback, which rxe repairs). The sync alone carries more
        // than 4 MiB from A to B: thousands of packets at RoCE MTU 4096
        b.requireRoceCrossedTheWire(1_000);
        org.junit.jupiter.api.Assertions.assertTrue(a.nic("tx_packets") >= b.rxe("rcvd_pkts"),
                "host A's NIC did not send what host B's rxe received: " + a.summary() + "; " + b.summary());
        System.out.printf("the cable delivered %d of host B's %d packets to host A, %d of A's %d to B%n",
                a.nic("rx_packets"), b.nic("tx_packets"), b.nic("rx_packets"), a.nic("tx_packets"));
    }
}
