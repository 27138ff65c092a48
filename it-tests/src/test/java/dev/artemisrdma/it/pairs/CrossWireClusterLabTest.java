package dev.artemisrdma.it.pairs;

import java.util.concurrent.TimeUnit;

import dev.artemisrdma.it.hosts.LabHost;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link PairsClusterLabTest}'s scenario with node A on host A and node B on host B of the two-host lab: the cluster
 * connection between them runs across the wire, ON_DEMAND load balancing moves what is produced on A to the
 * consumer on B, and when the consumer moves to A the rest is redistributed back across the wire, every message once,
 * in order. Beyond the scenario's own assertions (every link RDMA, frames over the peers' links, no Netty attempt),
 * both hosts' counters show that the messages crossed the wire over RoCE in both directions ({@link PairCrossing}):
 * all of them from A to B; from B to A, half delivered to the consumer on B (a client on A) and the other half
 * redistributed to A.
 *
 * <p>Outside CI (run-lab-tests' default wire selection leaves it out): it-tests/bench/wire-pairs runs it.
 */
@Timeout(value = 900, unit = TimeUnit.SECONDS)
class CrossWireClusterLabTest {

    @Test
    void aClusterOfNodesOnAAndBRedistributesAcrossTheWire() throws Exception {
        LabHost.requireTwoHosts();
        PairCrossing crossing = PairCrossing.start();
        PairsClusterLabTest.run(LabHost.a().wireAddress(), LabHost.b().wireAddress(), LabHost.b());
        crossing.requireMessagesCrossed("cluster across the wire", PairsClusterLabTest.MESSAGES);
    }
}
