package dev.artemisrdma.it.pairs;

import static dev.artemisrdma.it.pairs.PairBroker.props;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalTime;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BiPredicate;
import java.util.function.Predicate;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.it.Lab;
import dev.artemisrdma.it.hosts.LabHost;
import dev.artemisrdma.it.hosts.WireCounters;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.JMSException;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import org.apache.activemq.artemis.jms.client.ActiveMQConnection;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;

/**
 * A replicated pair across the two-host lab's wire from {@code config/pairs/primary.xml} and {@code backup.xml}: the
 * primary on host A, its backup on host B, synchronized, with an ha client on A; and {@link #pull}, which pulls host
 * B's cable under a transacted producer while a {@link PairWatch} reads both brokers' reports.
 */
final class WireReplicatedPair implements AutoCloseable {

    /** The retry budget of the backup's connections (it connects): (retryCount 6 + 1) x 4.096 us x 2^17. */
    static final long BUDGET_MILLIS = Math.round(7 * 4.096e-3 * (1 << 17));
    /** Artemis's server logger at info on the backup: its quorum vote and activation lines are info. */
    private static final String SERVER_LOGGER = "org.slf4j.simpleLogger.log.org.apache.activemq.artemis.core.server";

    final String label;
    final Path data;
    final PairBroker primary;
    final PairBroker backup;
    final int portB;
    final ActiveMQConnectionFactory cf;
    final Connection connection;
    final List<String> events;
    final WireCounters a0;
    final WireCounters b0;

    private WireReplicatedPair(String label, Path data, PairBroker primary, PairBroker backup, int portB,
                           ActiveMQConnectionFactory cf, Connection connection, List<String> events,
                           WireCounters a0, WireCounters b0) {
        this.label = label;
        this.data = data;
        this.primary = primary;
        this.backup = backup;
        this.portB = portB;
        this.cf = cf;
        this.connection = connection;
        this.events = events;
        this.a0 = a0;
        this.b0 = b0;
    }

    /** {@code backupProperties}: a broker properties file for the backup (null: replication.properties). */
    static WireReplicatedPair start(String label, String backupProperties) throws Exception {
        WireCounters a0 = LabHost.a().counters();
        WireCounters b0 = LabHost.b().counters();
        String primaryAddr = LabHost.a().wireAddress();
        String backupAddr = LabHost.b().wireAddress();
        int portP = Lab.freshPort();
        int portB = Lab.freshPort();
        Path data = Files.createTempDirectory("pairs-flap-" + label);
        Map<String, String> primaryProps = props("rdma.host", primaryAddr, "rdma.port", "" + portP,
                "rdma.peer.host", backupAddr, "rdma.peer.port", "" + portB, "properties", "replication.properties");
        Map<String, String> backupProps = props("rdma.host", backupAddr, "rdma.port", "" + portB,
                "rdma.peer.host", primaryAddr, "rdma.peer.port", "" + portP, "properties",
                backupProperties == null ? "replication.properties" : backupProperties, SERVER_LOGGER, "info");
        PairBroker primary = PairBroker.start(label + "-primary", "primary.xml", data.resolve("p"), false,
                primaryProps);
        PairBroker backup = null;
        ActiveMQConnectionFactory cf = null;
        Connection connection = null;
        try {
            cf = RdmaConnectionFactories.create("rdma://" + primaryAddr + ":" + portP + "?ha=true"
                    + "&reconnectAttempts=-1&retryInterval=100&maxRetryInterval=1000#rdma://" + backupAddr + ":"
                    + portB);
            connection = cf.createConnection();
            List<String> events = new CopyOnWriteArrayList<>();
            ((ActiveMQConnection) connection).setFailoverListener(e -> events.add(e + " at " + LocalTime.now()));
            connection.start();
            try (Session s = connection.createSession(true, Session.SESSION_TRANSACTED)) { // for the initial sync
                MessageProducer p = s.createProducer(s.createQueue("flap.seed"));
                p.setDeliveryMode(DeliveryMode.PERSISTENT);
                for (int i = 0; i < 200; i++) {
                    BytesMessage m = s.createBytesMessage();
                    m.writeBytes(new byte[1024]);
                    p.send(m);
                }
                s.commit();
            }
            long t0 = System.nanoTime();
            backup = PairBroker.start(label + "-backup", "backup.xml", data.resolve("b"), false, backupProps,
                    null, LabHost.b());
            backup.await("the initial sync", r -> r.get("replicaSync").equals("true"), 300);
            Map<String, String> report = primary.await("replication", r -> r.get("replication")
                    .equals("RdmaConnection"), 60);
            System.out.printf("[%s] backup on B synchronized %d ms after its start: %s%n", label,
                    (System.nanoTime() - t0) / 1_000_000, report);
            return new WireReplicatedPair(label, data, primary, backup, portB, cf, connection, events, a0, b0);
        } catch (Throwable t) {
            if (connection != null) {
                connection.close();
            }
            if (cf != null) {
                cf.close();
            }
            if (backup != null) {
                backup.close();
            }
            primary.close();
            throw t;
        }
    }

    /**
     * A producer on {@code queue} commits, the cable of B is pulled for {@code pullMillis}, and both brokers are
     * watched from just before the pull until {@code done} holds of their reports (primary, backup) after the cable
     * is back, or for {@code watchMillis} after the cable is back; then the producer stops.
     */
    CablePull pull(String queue, long pullMillis, long watchMillis,
                   BiPredicate<Map<String, String>, Map<String, String>> done) throws Exception {
        return pull(queue, pullMillis, null, 0, watchMillis, done);
    }

    /**
     * As {@link #pull(String, long, long, BiPredicate)}, but the cable stays out after {@code pullMillis} until the
     * backup's log since the pull satisfies {@code holdUntil} (relayed from host B over the management link, which
     * stays up), at most {@code maxPullMillis}: an outage measured in what the backup did while it lasted rather than
     * in seconds, which a busy host stretches ({@link CablePull#held} says whether it came).
     */
    CablePull pull(String queue, long pullMillis, Predicate<String> holdUntil, long maxPullMillis, long watchMillis,
                   BiPredicate<Map<String, String>, Map<String, String>> done) throws Exception {
        TransactedProducer producer = new TransactedProducer(connection, queue);
        Thread thread = new Thread(producer, label + "-producer");
        thread.start();
        try {
            producer.awaitCommits(30, 120);
            Map<String, String> before = primary.report();
            int primaryLog = primary.log().length();
            int backupLog = backup.log().length();
            PairWatch watch = new PairWatch(this);
            watch.start();
            Thread.sleep(600); // the watch's first reports
            long pulled = System.nanoTime();
            watch.pulledAt = pulled;
            LocalTime pulledAt = LocalTime.now();
            long commitsAtPull = producer.commits.get();
            LabHost.b().cable(false);
            Thread.sleep(pullMillis);
            boolean held = holdUntil == null;
            long holdDeadline = pulled + TimeUnit.MILLISECONDS.toNanos(maxPullMillis);
            while (!held && System.nanoTime() < holdDeadline) {
                held = holdUntil.test(backup.log().substring(backupLog));
                if (!held) {
                    Thread.sleep(100);
                }
            }
            LabHost.b().cable(true);
            long outage = (System.nanoTime() - pulled) / 1_000_000;
            watch.until(done, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(watchMillis));
            long commitsAfter = producer.commits.get();
            producer.running = false;
            thread.join(60_000);
            return new CablePull(this, producer, before, pulledAt, outage, held, commitsAtPull, commitsAfter, watch,
                    backupLog, primary.log().substring(primaryLog), backup.log().substring(backupLog));
        } finally {
            producer.running = false;
            thread.join(60_000);
        }
    }

    WireCounters crossing() throws Exception {
        WireCounters a = LabHost.a().counters().since(a0);
        WireCounters b = LabHost.b().counters().since(b0);
        System.out.printf("[%s] crossing: %s; %s%n", label, a.summary(), b.summary());
        // host B talks only across the wire (its backup to the primary): its counters prove the crossing
        return b;
    }

    @Override
    public void close() throws Exception {
        try {
            connection.close();
        } catch (JMSException e) {
            System.out.println("[" + label + "] closing the client: " + e);
        }
        cf.close();
        backup.close();
        primary.close();
        PairsLab.deleteTree(data);
    }
}
