package dev.artemisrdma.it.artemis;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.artemisrdma.it.hosts.LabHost;
import dev.artemisrdma.it.hosts.WireCounters;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.TimeUnit;

/**
 * {@link BrokerKillLabTest} across the two-host lab's wire: the broker on host B, SIGKILLed there under a connected
 * client on host A, which hears of it from the kernel's disconnect that crosses the wire, reconnects to the restarted
 * broker and finds every durable message. B talks only across the wire, so its rxe counters, carried by its NIC,
 * prove the crossing.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class CrossWireBrokerKillLabTest {

    @Test
    void aBrokerKilledOnHostBIsNoticedAcrossTheWireAndTheClientOnAReconnectsWithoutLosingDurableMessages()
            throws Exception {
        LabHost.requireTwoHosts();
        WireCounters b0 = LabHost.b().counters();
        long noticed = BrokerKillLabTest.killAndRestart(LabHost.b().wireAddress(), LabHost.b());
        WireCounters b = LabHost.b().counters().since(b0);
        System.out.printf("broker on host B killed: the client on A noticed after %d ms; %s%n", noticed, b.summary());
        b.requireRoceCrossedTheWire(200);
        assertTrue(b.rnr() == 0, "RNR on host B: " + b.summary());
    }
}
