package dev.artemisrdma.it.pairs;

import java.util.concurrent.TimeUnit;

import dev.artemisrdma.it.hosts.LabHost;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link PairsBridgeLabTest}'s scenario with site A on host A and site B on host B of the two-host lab: the core
 * bridge from A to B runs across the wire, B is SIGKILLed on its host in the middle of the stream and started again
 * there, the bridge reconnects across the wire by itself, and every durable message reaches B exactly once, consumed
 * by a client on A. Beyond the scenario's own assertions (every message once, every link RDMA, no Netty attempt),
 * both hosts' counters show that the messages crossed the wire over RoCE in both directions ({@link PairCrossing}):
 * the bridge's from A to B, the consumer's from B to A.
 *
 * <p>Outside CI (run-lab-tests' default wire selection leaves it out): it-tests/bench/wire-pairs runs it.
 */
@Timeout(value = 900, unit = TimeUnit.SECONDS)
class CrossWireBridgeLabTest {

    @Test
    void aBridgeFromAReconnectsAcrossTheWireAfterItsTargetOnBWasKilled() throws Exception {
        LabHost.requireTwoHosts();
        PairCrossing crossing = PairCrossing.start();
        PairsBridgeLabTest.run(LabHost.a().wireAddress(), LabHost.b().wireAddress(), LabHost.b());
        crossing.requireMessagesCrossed("bridge across the wire", PairsBridgeLabTest.MESSAGES);
    }
}
