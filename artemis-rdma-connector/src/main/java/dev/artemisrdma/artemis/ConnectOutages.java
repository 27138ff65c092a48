package dev.artemisrdma.artemis;

import java.lang.invoke.MethodHandles;
import java.util.LinkedHashMap;
import java.util.Map;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the JVM's RDMA connectors say while a peer cannot be reached. Artemis retries a lost or refused connection with
 * a new connector every {@code retryInterval} (100 ms and up), for ever with {@code reconnectAttempts=-1}: one WARN per
 * attempt would bury everything else. So the first failure of an outage is said at WARN, the further ones at debug,
 * and the first connection after an outage at INFO, with how long it lasted. Kept per target for the whole JVM,
 * because each attempt is a new connector; bounded: the oldest outage is forgotten beyond {@value #MAX_TARGETS}.
 */
final class ConnectOutages {

    /** How a failure or a success was reported (tests read it). */
    enum Report { WARN, DEBUG, INFO, NONE }

    static final int MAX_TARGETS = 256;
    private static final Logger logger = LoggerFactory.getLogger(MethodHandles.lookup().lookupClass());
    private static final ConnectOutages JVM = new ConnectOutages();

    private static final class Outage {
        final long since = System.nanoTime();
        int failures = 1;
    }

    private final Map<String, Outage> outages = new LinkedHashMap<>();

    static ConnectOutages jvm() {
        return JVM;
    }

    /** An attempt to connect to {@code target} failed for {@code reason}. */
    Report failed(String target, String reason) {
        synchronized (outages) {
            Outage outage = outages.get(target);
            if (outage != null) {
                outage.failures++;
                logger.debug("RDMA connector: cannot connect to {} (attempt {} of this outage): {}", target,
                        outage.failures, reason);
                return Report.DEBUG;
            }
            if (outages.size() >= MAX_TARGETS) {
                outages.remove(outages.keySet().iterator().next());
            }
            outages.put(target, new Outage());
        }
        logger.warn("RDMA connector: cannot connect to {}: {}; further failures are logged at debug until it is"
                + " reachable again", target, reason);
        return Report.WARN;
    }

    /** True while {@code target} is in an outage (for tests). */
    boolean inOutage(String target) {
        synchronized (outages) {
            return outages.containsKey(target);
        }
    }

    /** Outages remembered (for tests). */
    int size() {
        synchronized (outages) {
            return outages.size();
        }
    }

    /** A connection to {@code target} was made. */
    Report connected(String target) {
        Outage outage;
        synchronized (outages) {
            outage = outages.remove(target);
        }
        if (outage == null) {
            return Report.NONE;
        }
        logger.info("RDMA connector: connected to {} again after {} failed attempts in {} ms", target, outage.failures,
                (System.nanoTime() - outage.since) / 1_000_000);
        return Report.INFO;
    }
}
