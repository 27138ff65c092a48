package dev.artemisrdma.it.pairs;

import static dev.artemisrdma.it.pairs.WireReplicatedPair.BUDGET_MILLIS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import dev.artemisrdma.it.hosts.LabHost;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The replication link across the two-host lab's wire when the link flaps: a replicated pair ({@link
 * WireReplicatedPair}: primary on host A, backup on host B, from the sample configuration), synchronized, under a
 * transacted producer on A (batches of 10 durable 1 KiB messages with duplicate detection), while host B's cable is
 * pulled for 0.3 s ({@link LabHost#cable}: B's NIC loses its carrier and rxe's port on B goes down; A's stays up),
 * shorter than the retry budget: the same replication connection goes on, the backup stays in sync and inactive, the
 * client sees nothing, every committed message is on the primary once. What happens when the link stays down past
 * the budget is {@link CrossWireLongOutageLabTest}'s (outside CI: it takes several minutes).
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class CrossWireReplicationFlapLabTest {

    private static final long FLAP_MILLIS = 300;
    /** rxe counts its retransmissions while the cable is out, the carrierless NIC does not (see CrossWireLabTest). */
    private static final double FLAP_DROPS = 0.05;
    private static final Pattern RODE_OUT = Pattern.compile(
            "active again after (\\d+) ms; (\\d+) connection\\(s\\) rode it out");

    @Test
    void aShortFlapOfTheBackupsCableIsRiddenOutByTheReplicationLink() throws Exception {
        LabHost.requireTwoHosts();
        try (WireReplicatedPair pair = WireReplicatedPair.start("flap", null)) {
            CablePull pull = pair.pull("flap.orders", FLAP_MILLIS, BUDGET_MILLIS + 3_000, null);
            pull.print();
            PairWatch w = pull.watch();
            assertNull(w.failure.get(), "the watch failed");
            assertEquals(Map.of(), w.firsts, "a flap of " + FLAP_MILLIS + " ms changed the pair: " + w.timeline);
            assertEquals(Set.of(pull.before().get("replicationChannel")), w.channels,
                    "the primary's replication connection was replaced: " + w.timeline);
            // the backup's transport saw the port go down and its connections wait for it, and rode it out
            String backupLog = pull.backupLogOnce(log -> RODE_OUT.matcher(log).find(), 30);
            Matcher rodeOut = RODE_OUT.matcher(backupLog);
            assertTrue(rodeOut.find() && Integer.parseInt(rodeOut.group(2)) >= 1, "host B's transport did not ride "
                    + "out the flap: " + backupLog);
            System.out.printf("[%s] host B's port was down for %s ms; %s of its connections rode it out%n", pair.label,
                    rodeOut.group(1), rodeOut.group(2));
            assertFalse(backupLog.contains(" lost: ") || pull.primaryLog().contains(" lost: ")
                    || pull.primaryLog().contains("IBV_WC_RETRY_EXC_ERR") || pull.primaryLog().contains("AMQ222092"),
                    "a connection failed in the flap: primary " + pull.primaryLog() + "; backup " + backupLog);
            pull.producer().assertUntroubled(pair.events);
            assertTrue(pull.commitsAfter() > pull.commitsAtPull(), "the producer committed nothing after the flap");
            assertTrue(pull.producer().longestGapMillis() < 3_000, "the producer waited "
                    + pull.producer().longestGapMillis() + " ms for a commit across a " + FLAP_MILLIS + " ms flap");
            pull.assertExactlyOnce();
            pair.crossing().requireRoceCrossedTheWire(1_000, FLAP_DROPS);
        }
    }
}
