package dev.artemisrdma.it.pairs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import jakarta.jms.Connection;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.Session;

/**
 * What one {@link WireReplicatedPair#pull} did: the producer's counts, the timeline, both brokers' log lines since
 * the pull (as they were when the watch ended; {@link #backupLogOnce} waits for lines still on their way from host B).
 * {@code held}: the cable stayed out until the backup did what the pull waited for (true when it waited for nothing).
 */
record CablePull(WireReplicatedPair pair, TransactedProducer producer, Map<String, String> before, LocalTime pulledAt,
                 long outageMillis, boolean held, long commitsAtPull, long commitsAfter, PairWatch watch,
                 int backupLogFrom, String primaryLog, String backupLog) {

    /** A log line's time of day, as SLF4J's simple logger prints it here. */
    private static final Pattern STAMP = Pattern.compile("^(\\d\\d):(\\d\\d):(\\d\\d)\\.(\\d{3}) ");

    void print() {
        String label = pair.label;
        System.out.printf("[%s] cable of host B pulled at %s (A's clock) for %d ms%s; replication before: %s "
                + "channel %s%n", label, pulledAt, outageMillis, held ? "" : " (what it waited for did not come)",
                before.get("replication"), before.get("replicationChannel"));
        System.out.printf("[%s] producer: %d commits at the pull, %d when the watch ended; longest wait for a "
                + "commit %d ms; rolled back %d, outcome unknown %d, duplicates refused %d, failure %s; client "
                + "failover events %s%n", label, commitsAtPull, commitsAfter, producer.longestGapMillis(),
                producer.rolledBack.get(), producer.unknown.get(), producer.duplicates.get(),
                producer.failure.get(), pair.events);
        System.out.printf("[%s] both brokers' reports (ms after the pull):%n", label);
        watch.timeline.forEach(line -> System.out.println("    " + line));
        System.out.printf("[%s] first seen (ms after the pull): %s; client topology: %s%n", label, watch.firsts,
                watch.topologies);
        System.out.printf("[%s] primary's log since the pull:%n%s", label, interesting(primaryLog));
        System.out.printf("[%s] backup's log since the pull:%n%s", label, interesting(backupLog));
    }

    /**
     * The backup's log since the pull once {@code has} holds of it, or as it is after {@code seconds}: its lines
     * reach host A through the process agent, after the report that the watch read may already have shown their
     * effect.
     */
    String backupLogOnce(Predicate<String> has, long seconds) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        String log = pair.backup.log().substring(backupLogFrom);
        while (!has.test(log) && System.nanoTime() < deadline) {
            Thread.sleep(200);
            log = pair.backup.log().substring(backupLogFrom);
        }
        return log;
    }

    /**
     * Milliseconds from the IBV_EVENT_PORT_ERR line of the backup's transport to its first line that fails a
     * connection (host B's clock both), in {@code backupLog} (the backup's log since the pull).
     */
    static long backupFailureAfterPortDown(String backupLog) {
        Long down = firstTime(backupLog, "IBV_EVENT_PORT_ERR on RDMA device");
        Long failed = firstTime(backupLog, " lost: ");
        assertTrue(down != null && failed != null, "the backup's transport logged no port-down event or no lost "
                + "connection: " + backupLog);
        return failed - down;
    }

    /** Every committed message on the primary once, and nothing else. */
    void assertExactlyOnce() throws Exception {
        Set<Integer> got = receiveAll(pair.connection, producer.queue);
        Set<Integer> committed = new TreeSet<>(producer.committed);
        System.out.printf("[%s] %d messages committed, %d on the primary%n", pair.label, committed.size(),
                got.size());
        assertEquals(committed, got, "committed messages on the primary");
    }

    /** The time of day in milliseconds of the first line of {@code log} that contains {@code text}, or null. */
    private static Long firstTime(String log, String text) {
        for (String line : log.split("\n")) {
            Matcher m = STAMP.matcher(line);
            if (line.contains(text) && m.find()) {
                return ((Long.parseLong(m.group(1)) * 60 + Long.parseLong(m.group(2))) * 60
                        + Long.parseLong(m.group(3))) * 1000 + Long.parseLong(m.group(4));
            }
        }
        return null;
    }

    /** Artemis's and the transport's log lines, without the reports, the debug lines and stack traces. */
    private static String interesting(String log) {
        StringBuilder b = new StringBuilder();
        for (String line : log.split("\n")) {
            if (STAMP.matcher(line).find() && !line.contains(" DEBUG ") && !line.contains("AMQ221025")) {
                b.append("    ").append(line.length() > 300 ? line.substring(0, 300) + "..." : line).append('\n');
            }
        }
        return b.toString();
    }

    /** Every message left on {@code queue}, by sequence number; a duplicate fails. */
    private static Set<Integer> receiveAll(Connection connection, String queue) throws Exception {
        Set<Integer> seen = new TreeSet<>();
        List<Integer> duplicates = new ArrayList<>();
        try (Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
             MessageConsumer consumer = session.createConsumer(session.createQueue(queue))) {
            Message m;
            while ((m = consumer.receive(5_000)) != null) {
                if (!seen.add(m.getIntProperty("seq"))) {
                    duplicates.add(m.getIntProperty("seq"));
                }
            }
        }
        assertEquals(List.of(), duplicates, "messages delivered twice");
        return seen;
    }
}
