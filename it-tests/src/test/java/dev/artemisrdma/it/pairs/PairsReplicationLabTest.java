package dev.artemisrdma.it.pairs;

import static dev.artemisrdma.it.pairs.PairBroker.props;
import static dev.artemisrdma.it.pairs.PairsClusterLabTest.elapsedMillis;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.it.Lab;
import dev.artemisrdma.it.RdmaResources;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import jakarta.jms.TransactionRolledBackException;
import org.apache.activemq.artemis.api.core.ActiveMQException;
import org.apache.activemq.artemis.api.core.ActiveMQExceptionType;
import org.apache.activemq.artemis.api.core.client.FailoverEventType;
import org.apache.activemq.artemis.jms.client.ActiveMQConnection;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import dev.artemisrdma.it.compat.OlderBuilds;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A primary and its backup as processes from {@code config/pairs/primary.xml} and {@code backup.xml} (with
 * {@code replication.properties}), replicating over
 * RDMA: the backup's initial sync (durable messages, large messages, a paged address) and live replication run on
 * the primary's RDMA acceptor; the primary is SIGKILLed while a transacted producer is sending; the backup becomes
 * active and the {@code ha=true} client fails over to the backup's RDMA connector, which it learned from the topology;
 * every committed message is there once. Then the primary comes back, takes over again (failback), and the client is
 * back on it. With {@code -Dpairs.replication.tcpBaseline=true} (it-tests/bench/pairs-bench sets it; CI does not, the
 * run tests Artemis's Netty transport, not ours, and took CI three minutes) the same kill runs over Netty TCP in the
 * same lab boot, under the same assertions, and both failover times are printed.
 *
 * <p>What reaches the application, on either transport, is exactly what Artemis 2.56.0's client gives a transacted
 * session that fails over ({@code ClientSessionImpl.commit}/{@code handleFailover}): at most one exception per
 * failover, either a {@code TransactionRolledBackException} (the failover came while the transaction was open: it is
 * rollback-only) or, when the failover came while the commit itself waited for its answer, a {@code JMSException}
 * caused by {@code ActiveMQTransactionOutcomeUnknownException} (the client cannot know whether the commit was done
 * before the primary died; Artemis's own documentation still says "rolled back" there, its code does not). Both are
 * answered by sending the batch again; after an unknown outcome duplicate detection refuses the batch
 * ({@code DUPLICATE_ID_REJECTED}) when the first commit was done. Anything else, more than one per failover, an
 * unknown outcome for a commit that started after the failover completed, or a duplicate refusal not preceded by an
 * unknown outcome fails the test. Each run prints its counts and the share of the producer's time spent waiting in
 * commit (the chance that the kill lands in a commit and gives an unknown outcome). Counts: {@code -Dpairs.replication.messages} (CI 2,000), {@code .large} (CI 4)
 * of {@code .largeBytes} (CI 1 MiB); it-tests/bench/pairs-bench runs the issue's 20,000 and 20 x 10 MiB.
 */
@Timeout(value = 900, unit = TimeUnit.SECONDS)
public class PairsReplicationLabTest {

    private static final int MESSAGES = Integer.getInteger("pairs.replication.messages", 2_000);
    private static final int LARGE = Integer.getInteger("pairs.replication.large", 4);
    private static final int LARGE_BYTES = Integer.getInteger("pairs.replication.largeBytes", 1 << 20);
    private static final boolean TCP_BASELINE = Boolean.getBoolean("pairs.replication.tcpBaseline");
    private static final int PAGED = 300; // 8 KiB each: 2.4 MB through a 1 MiB address
    private static final String DUPLICATE_ID = "_AMQ_DUPL_ID";
    private static final AtomicInteger ROLLED_BACK = new AtomicInteger();
    private static final AtomicInteger OUTCOME_UNKNOWN = new AtomicInteger();
    private static final AtomicInteger DUPLICATES_REFUSED = new AtomicInteger();
    /** When each commit whose outcome the failover left unknown was started (System.nanoTime). */
    private static final List<Long> UNKNOWN_COMMITS_STARTED = new java.util.concurrent.CopyOnWriteArrayList<>();
    /** Time the live producer spent in commit(), and in all (nanoseconds). */
    private static final AtomicLong COMMIT_NANOS = new AtomicLong();
    private static final AtomicLong BATCH_NANOS = new AtomicLong();
    /** The durable and large messages this instance's runs store before the backup starts. */
    private int messages = MESSAGES;
    private int large = LARGE;

    @Test
    void replicationAndFailoverOverRdma() throws Exception {
        RdmaResources baseline = PairsLab.baseline();
        long rdmaMillis = run(false, null);
        PairsLab.assertResourcesBack(baseline); // the RDMA scenario (a SIGKILLed primary among it) left nothing
        if (!TCP_BASELINE) {
            System.out.printf("FAILOVER client without a broker: RDMA %d ms%n", rdmaMillis);
            return;
        }
        long tcpMillis = run(true, null);
        System.out.printf("FAILOVER client without a broker: RDMA %d ms, Netty TCP %d ms%n", rdmaMillis, tcpMillis);
        PairsLab.assertResourcesBack(baseline);
    }

    /**
     * A rolling upgrade's mixed pair (issue 26): the primary on this build, the backup on the last release's
     * connector (built from history by build-old-connectors), replicating over RDMA. The same scenario and assertions
     * as above, but the failback: the backup syncs, the primary is SIGKILLed under a transacted producer, the client
     * fails over to the older backup, and every committed message is there once.
     */
    @Test
    void aBackupOnTheLastReleaseTakesOverFromAPrimaryOnThisBuild() throws Exception {
        OlderBuilds.Build release = OlderBuilds.lastRelease();
        RdmaResources baseline = PairsLab.baseline();
        long millis = run(false, release);
        System.out.printf("FAILOVER to a backup on %s (%s): client without a broker for %d ms%n", release.name(),
                release.revision(), millis);
        PairsLab.assertResourcesBack(baseline);
    }

    /**
     * Issue 23, a stuck reader among broker pairs: the backup is stopped (SIGSTOP: its connection stays up, the kernel
     * still acknowledges, it takes no frame and grants no credit) while the primary replicates 10 MiB of durable
     * messages to it. Artemis detects slow replication only on Netty connections, so before unwritableTimeout the
     * primary waited for such a backup for ever. Now the primary fails the replication connection once it stayed
     * unwritable for unwritableTimeout (30 s), named in its log, before Artemis's connection TTL (60 s) could, and
     * goes on alone: the producer's sends complete and a new one is served.
     */
    @Test
    void aStuckBackupIsDroppedAfterUnwritableTimeoutAndThePrimaryGoesOn() throws Exception {
        RdmaResources baseline = PairsLab.baseline();
        int portP = Lab.freshPort();
        int portB = Lab.freshPort();
        Path data = Files.createTempDirectory("pairs-stuck-backup");
        Map<String, String> primaryProps = replicationProps(Lab.addr0(), portP, Lab.addr1(), portB);
        Map<String, String> backupProps = replicationProps(Lab.addr1(), portB, Lab.addr0(), portP);
        PairBroker primary = PairBroker.start("stuck-primary", "primary.xml", data.resolve("p"), false, primaryProps);
        PairBroker backup = null;
        try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create("rdma://" + Lab.addr0() + ":" + portP
                + "?reconnectAttempts=0&blockOnDurableSend=false");
             Connection connection = cf.createConnection()) {
            backup = PairBroker.start("stuck-backup", "backup.xml", data.resolve("b"), false, backupProps);
            backup.await("the initial sync", r -> r.get("replicaSync").equals("true"), 300);
            primary.await("replication", r -> r.get("replication").equals("RdmaConnection"), 60);
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue("stuck.replication");
            MessageProducer producer = session.createProducer(queue);
            producer.setDeliveryMode(DeliveryMode.PERSISTENT);
            byte[] body = new byte[50 << 10];
            // the queue exists, replicated, before the backup stops: its creation waits for the backup's answer, and
            // a backup that answers nothing while its connection takes the few bytes asked is Artemis's connection
            // TTL's to judge (as on Netty); the transport's bound is for a peer that takes no more frames
            BytesMessage first = session.createBytesMessage();
            first.writeBytes(body);
            producer.send(first);
            session.createConsumer(queue).close(); // a round trip on the session: the send and the creation are done
            backup.signal("STOP");
            long stoppedAt = System.nanoTime();
            for (int i = 1; i < 200; i++) { // 10 MiB, asynchronously: replication queues it toward the backup
                BytesMessage m = session.createBytesMessage();
                m.writeBytes(body);
                producer.send(m);
            }
            Map<String, String> alone = primary.await("the primary on its own", r -> r.get("replication")
                    .equals("none"), 90);
            long droppedMillis = elapsedMillis(stoppedAt);
            String log = primary.log();
            String line = log.lines().filter(l -> l.contains("past unwritableTimeout")).findFirst().orElse(null);
            System.out.printf("STUCK BACKUP: the primary dropped the stopped backup %d ms after its SIGSTOP: %s; %s%n",
                    droppedMillis, line, alone);
            // (the backup's source address is the route's choice: on the lab's one host, often the primary's own)
            assertTrue(line != null, "the primary did not fail the replication connection for unwritableTimeout (log "
                    + primary.warnings() + ")");
            assertTrue(droppedMillis < 60_000, "the primary dropped the backup only after " + droppedMillis
                    + " ms: Artemis's connection TTL, not unwritableTimeout");
            // the primary goes on: a durable round trip on the queue the stuck replication held
            producer.close();
            connection.start();
            try (Session check = connection.createSession(false, Session.AUTO_ACKNOWLEDGE)) {
                MessageProducer p = check.createProducer(check.createQueue("stuck.after"));
                p.setDeliveryMode(DeliveryMode.PERSISTENT);
                p.send(check.createTextMessage("served"));
                Message got = check.createConsumer(check.createQueue("stuck.after")).receive(20_000);
                assertTrue(got != null, "the primary served nothing after dropping its backup");
                int held = 0;
                MessageConsumer consumer = check.createConsumer(queue);
                while (consumer.receive(5_000) != null) {
                    held++;
                }
                assertEquals(200, held, "durable messages sent before and while the backup was stuck");
            }
        } finally {
            if (backup != null) {
                backup.signal("CONT");
                backup.kill();
            }
            primary.close();
            PairsLab.deleteTree(data);
        }
        PairsLab.assertResourcesBack(baseline); // the dropped replication link and the killed backup left nothing
    }

    /**
     * This instance's runs with half the configured durable and large messages (CI: 1,000 and 2), for a variant whose
     * every byte costs more in the lab (TLS: the crypto in C1-compiled Java under emulation).
     */
    PairsReplicationLabTest halfCounts() {
        messages = Math.max(20, MESSAGES / 2);
        large = Math.max(1, LARGE / 2);
        return this;
    }

    /** A pair broker's substitutions: its own address and port, its peer's, and the replication properties. */
    private static Map<String, String> replicationProps(String host, int port, String peerHost, int peerPort) {
        return props("rdma.host", host, "rdma.port", "" + port, "rdma.peer.host", peerHost, "rdma.peer.port",
                "" + peerPort, "properties", "replication.properties");
    }

    /**
     * The whole scenario on one transport, the backup on {@code olderBackup}'s connector (null: this build's; only
     * then does the primary come back and take over again); returns the milliseconds from the kill to the
     * completed failover.
     */
    private long run(boolean tcp, OlderBuilds.Build olderBackup) throws Exception {
        return run(tcp, olderBackup, Lab.addr0(), Lab.addr1(), null);
    }

    /**
     * As above, the primary on {@code primaryAddr} of this host and the backup on {@code backupAddr} of
     * {@code backupHost} (null: this host), so that the replication link can cross the two-host lab's wire.
     */
    public long run(boolean tcp, OlderBuilds.Build olderBackup, String primaryAddr, String backupAddr,
             dev.artemisrdma.it.hosts.LabHost backupHost) throws Exception {
        return run(tcp, olderBackup, primaryAddr, backupAddr, backupHost, null);
    }

    /**
     * TLS for a run's pair and client (issue 38): {@code brokerProperties} are given to both brokers after
     * replication.properties (the TLS keys of their acceptor "rdma" and connectors "self" and "peer"),
     * {@code clientQuery} ends the client's URL ({@code &sslEnabled=true&...}, for the primary and the backup), and
     * {@code whileReplicating} runs once the backup is in sync and the primary replicates to it, with the primary's
     * address and port (to show that a plain client is refused there meanwhile).
     */
    public record Tls(Map<String, String> brokerProperties, String clientQuery, Check whileReplicating) {

        /** What {@link Tls#whileReplicating} runs. */
        public interface Check {
            void run(String primaryAddr, int primaryPort) throws Exception;
        }
    }

    /**
     * As above, over TLS when {@code tls} is not null (RDMA only): then the primary's replication link and every
     * connection its acceptor took must be TLS, and so must the client's connection to the backup after the failover.
     */
    public long run(boolean tcp, OlderBuilds.Build olderBackup, String primaryAddr, String backupAddr,
             dev.artemisrdma.it.hosts.LabHost backupHost, Tls tls) throws Exception {
        if (tls != null && tcp) {
            throw new IllegalArgumentException("the TLS run is an RDMA run");
        }
        String scheme = tcp ? "tcp" : "rdma";
        // names the brokers, their data and the printed lines: "rdma", "tcp", "rdma-mixed", "rdma-tls"
        String label = (olderBackup == null ? scheme : scheme + "-mixed") + (tls == null ? "" : "-tls");
        ROLLED_BACK.set(0);
        OUTCOME_UNKNOWN.set(0);
        DUPLICATES_REFUSED.set(0);
        UNKNOWN_COMMITS_STARTED.clear();
        int portP = Lab.freshPort();
        int portB = Lab.freshPort();
        Path data = Files.createTempDirectory("pairs-replication-" + label);
        Map<String, String> primaryProps = replicationProps(primaryAddr, portP, backupAddr, portB);
        Map<String, String> backupProps = replicationProps(backupAddr, portB, primaryAddr, portP);
        if (tls != null) {
            tls.brokerProperties().forEach((k, v) -> {
                primaryProps.put(PairBrokerMain.PROPERTY + k, v);
                backupProps.put(PairBrokerMain.PROPERTY + k, v);
            });
        }
        String url = scheme + "://" + primaryAddr + ":" + portP + "?ha=true&reconnectAttempts=-1&retryInterval=100"
                + "&maxRetryInterval=1000" + (tls == null ? "" : tls.clientQuery()) + "#" + scheme + "://" + backupAddr
                + ":" + portB;
        PairBroker primary = PairBroker.start(label + "-primary", "primary.xml", data.resolve("p"), tcp,
                primaryProps);
        PairBroker backup = null;
        long connectStart = System.nanoTime();
        try (ActiveMQConnectionFactory cf = tcp ? new ActiveMQConnectionFactory(url) : RdmaConnectionFactories.create(url);
             Connection connection = cf.createConnection()) {
            System.out.printf("[%s] the client's first connection took %d ms%n", label, elapsedMillis(connectStart));
            List<FailoverEventType> events = new java.util.concurrent.CopyOnWriteArrayList<>();
            AtomicLong failedOverAt = new AtomicLong();
            CountDownLatch failedOver = new CountDownLatch(1);
            CountDownLatch failedBack = new CountDownLatch(2);
            ((ActiveMQConnection) connection).setFailoverListener(event -> {
                events.add(event);
                if (event == FailoverEventType.FAILOVER_COMPLETED) {
                    failedOverAt.compareAndSet(0, System.nanoTime());
                    failedOver.countDown();
                    failedBack.countDown();
                }
            });
            connection.start();
            Session session = connection.createSession(true, Session.SESSION_TRANSACTED);
            Queue orders = session.createQueue("ha.orders");
            Queue paged = session.createQueue("paged.orders");
            Set<Integer> committed = new TreeSet<>();
            long loadStart = System.nanoTime();
            sendBatches(session, orders, 0, messages, 512, committed);
            sendBatches(session, orders, messages, large, LARGE_BYTES, committed);
            Set<Integer> pagedCommitted = new TreeSet<>();
            sendBatches(session, paged, 0, PAGED, 8 * 1024, pagedCommitted);
            System.out.printf("[%s] %d durable + %d large (%d bytes) + %d paged messages stored in %d ms%n", label,
                    messages, large, LARGE_BYTES, PAGED, elapsedMillis(loadStart));

            long syncStart = System.nanoTime();
            backup = PairBroker.start(label + "-backup", "backup.xml", data.resolve("b"), tcp, backupProps,
                    olderBackup == null ? null : OlderBuilds.withConnector(System.getProperty("java.class.path"),
                            olderBackup.jar()), backupHost);
            backup.await("the initial sync", r -> r.get("replicaSync").equals("true"), 300);
            if (olderBackup != null) {
                assertTrue(backup.connector() != null && backup.connector().endsWith(olderBackup.jar().toString()),
                        "the backup runs " + olderBackup.jar() + ", not " + backup.connector());
                assertTrue(primary.connector() != null && !primary.connector().contains("/compat/"),
                        "the primary runs this build's connector, not " + primary.connector());
            }
            Map<String, String> primaryReport = primary.await("replication", r -> !r.get("replication").equals("none"),
                    60);
            System.out.printf("[%s] backup synchronized in %d ms: %s%n", label, elapsedMillis(syncStart),
                    primaryReport);
            if (!tcp) {
                assertEquals("RdmaConnection", primaryReport.get("replication"), "replication link " + primaryReport);
                assertTrue(Long.parseLong(primaryReport.get("replicationBytesOut")) > (long) large * LARGE_BYTES,
                        "the initial sync did not go over the RDMA link: " + primaryReport);
                PairsClusterLabTest.assertOnlyRdma(primaryReport); // the backup's links are accepted connections
                primary.await("the backup's RDMA connector in the topology",
                        r -> r.get("topologyRdmaBackups").equals("1"), 60);
            }
            if (tls != null) {
                // the primary's end of the replication link is a TLS channel, and its acceptor took no plain one
                assertTrue(primaryReport.get("replicationTls").startsWith("TLS"), "the replication link is not TLS: "
                        + primaryReport);
                assertEquals(primaryReport.get("inboundRdma"), primaryReport.get("inboundTls"),
                        "the TLS acceptor holds connections without TLS: " + primaryReport);
                tls.whileReplicating().run(primaryAddr, portP);
                System.out.printf("[%s] replication link: %s; the primary's acceptor holds %s connections, all TLS%n",
                        label, primaryReport.get("replicationTls"), primaryReport.get("inboundTls"));
            }

            // a producer under load when the primary dies
            COMMIT_NANOS.set(0);
            BATCH_NANOS.set(0);
            AtomicBoolean producing = new AtomicBoolean(true);
            AtomicReference<Throwable> producerFailure = new AtomicReference<>();
            Set<Integer> liveCommitted = java.util.Collections.synchronizedSet(new TreeSet<>());
            Thread producer = new Thread(() -> {
                try (Session live = connection.createSession(true, Session.SESSION_TRANSACTED)) {
                    int next = 1_000_000;
                    while (producing.get()) {
                        sendBatches(live, orders, next, 20, 512, liveCommitted);
                        next += 20;
                    }
                } catch (Throwable t) {
                    producerFailure.set(t);
                }
            }, "live-producer");
            producer.start();
            Thread.sleep(2_000);
            long killedAt = System.nanoTime();
            primary.kill();
            assertTrue(failedOver.await(60, TimeUnit.SECONDS), "the client did not fail over: " + events);
            long failoverMillis = TimeUnit.NANOSECONDS.toMillis(failedOverAt.get() - killedAt);
            backup.await("the backup active", r -> r.get("active").equals("true"), 60);
            if (tls != null) { // the client failed over to the backup's TLS acceptor with the topology's connector
                Map<String, String> active = backup.await("the client's connections on the backup",
                        r -> Integer.parseInt(r.get("inboundRdma")) > 0, 60);
                assertEquals(active.get("inboundRdma"), active.get("inboundTls"),
                        "the backup's acceptor holds connections without TLS after the failover: " + active);
            }
            Thread.sleep(2_000);
            producing.set(false);
            producer.join(60_000);
            System.out.printf("[%s] FAILOVER: client without a broker for %d ms after the SIGKILL (events %s);"
                    + " exceptions that reached the producer: transaction rolled back %d, commit outcome unknown %d"
                    + " (both sent again), re-sent batch refused as a duplicate %d; producer time in commit %.0f %%%n",
                    label, failoverMillis, events, ROLLED_BACK.get(), OUTCOME_UNKNOWN.get(), DUPLICATES_REFUSED.get(),
                    100.0 * COMMIT_NANOS.get() / Math.max(1, BATCH_NANOS.get()));
            assertEquals(null, producerFailure.get(), "an exception reached the application");
            assertOnlyArtemisFailoverOutcomes(events, failedOverAt.get());

            if (!tcp && olderBackup == null) { // failback: the primary comes back and takes over; the client follows
                long failbackStart = System.nanoTime();
                primary.restart();
                primary.await("the primary active again", r -> r.get("active").equals("true"), 300);
                assertTrue(failedBack.await(60, TimeUnit.SECONDS), "the client did not follow the failback: "
                        + events);
                System.out.printf("[%s] failback completed in %d ms%n", label, elapsedMillis(failbackStart));
            }
            if (tcp) { // the detector PairsLab.assertNoNettyAttempt relies on sees Netty when it is used
                assertTrue(primary.nettyAttempts() + backup.nettyAttempts() > 0,
                        "no Netty connection attempt seen in the brokers' logs of the Netty run");
            } else {
                PairsLab.assertNoNettyAttempt(primary, backup);
            }
            Set<Integer> all = new TreeSet<>(committed);
            all.addAll(liveCommitted);
            assertEquals(all, receiveAll(session, orders), "durable messages after failover");
            assertEquals(pagedCommitted, receiveAll(session, paged), "paged messages after failover");
            return failoverMillis;
        } finally {
            if (backup != null) {
                backup.close();
            }
            primary.close();
            PairsLab.deleteTree(data); // the guest's /tmp is RAM: the full counts leave ~1 GB per transport
        }
    }

    /**
     * The exceptions that reached the producer are those Artemis's client gives a transacted session for the one
     * failover it went through (see the class comment), on either transport.
     */
    private static void assertOnlyArtemisFailoverOutcomes(List<FailoverEventType> events, long failedOverAt) {
        long failovers = events.stream().filter(e -> e == FailoverEventType.FAILOVER_COMPLETED).count();
        assertTrue(ROLLED_BACK.get() + OUTCOME_UNKNOWN.get() <= failovers, "more failover exceptions ("
                + ROLLED_BACK.get() + " rolled back, " + OUTCOME_UNKNOWN.get() + " outcome unknown) than failovers ("
                + failovers + ") reached the application; events " + events);
        for (long started : UNKNOWN_COMMITS_STARTED) {
            assertTrue(started < failedOverAt, "a commit started " + TimeUnit.NANOSECONDS.toMillis(started
                    - failedOverAt) + " ms after the failover completed ended with an unknown outcome");
        }
        assertTrue(DUPLICATES_REFUSED.get() <= OUTCOME_UNKNOWN.get(), "duplicate refusals without an unknown outcome");
    }

    /**
     * Sends {@code count} messages in transactions of 20; a transaction rolled back by a failover, or whose commit's
     * outcome the failover left unknown, is sent again (a batch refused as a duplicate after an unknown outcome was
     * committed the first time).
     */
    private static void sendBatches(Session session, Queue queue, int first, int count, int size, Set<Integer> committed)
            throws Exception {
        MessageProducer producer = session.createProducer(queue);
        producer.setDeliveryMode(DeliveryMode.PERSISTENT);
        byte[] body = new byte[size];
        for (int start = first; start < first + count; start += 20) {
            int end = Math.min(start + 20, first + count);
            boolean afterUnknownOutcome = false;
            while (true) {
                long batchStart = System.nanoTime();
                long commitStart = 0;
                try {
                    for (int i = start; i < end; i++) {
                        BytesMessage m = session.createBytesMessage();
                        m.writeBytes(body);
                        m.setIntProperty("seq", i);
                        m.setStringProperty(DUPLICATE_ID, queue.getQueueName() + "-" + i);
                        producer.send(m);
                    }
                    commitStart = System.nanoTime();
                    session.commit();
                    long done = System.nanoTime();
                    COMMIT_NANOS.addAndGet(done - commitStart);
                    BATCH_NANOS.addAndGet(done - batchStart);
                    break;
                } catch (TransactionRolledBackException e) {
                    ROLLED_BACK.incrementAndGet(); // rolled back by the failover: send the batch again
                } catch (JMSException e) {
                    ActiveMQExceptionType type = e.getCause() instanceof ActiveMQException cause ? cause.getType()
                            : null;
                    if (type == ActiveMQExceptionType.DUPLICATE_ID_REJECTED && afterUnknownOutcome) {
                        // the batch's first commit reached the primary and was replicated, but its answer died with
                        // the primary; the client sent it again after failing over, and duplicate detection refused
                        // it as a whole: it is on the backup once
                        DUPLICATES_REFUSED.incrementAndGet();
                        break;
                    }
                    if (type != ActiveMQExceptionType.TRANSACTION_OUTCOME_UNKNOWN || commitStart == 0) {
                        throw e;
                    }
                    UNKNOWN_COMMITS_STARTED.add(commitStart);
                    afterUnknownOutcome = true;
                    // the commit was in flight when the primary died: it may or may not have happened, so the
                    // batch goes again, and duplicate detection drops it if the backup has it already
                    OUTCOME_UNKNOWN.incrementAndGet();
                }
            }
            for (int i = start; i < end; i++) {
                committed.add(i);
            }
        }
        producer.close();
    }

    private static Set<Integer> receiveAll(Session session, Queue queue) throws Exception {
        Set<Integer> seen = new TreeSet<>();
        List<Integer> duplicates = new ArrayList<>();
        try (MessageConsumer consumer = session.createConsumer(queue)) {
            while (true) {
                List<Integer> batch = new ArrayList<>();
                Message m;
                while (batch.size() < 100 && (m = consumer.receive(3_000)) != null) {
                    batch.add(m.getIntProperty("seq"));
                }
                try {
                    session.commit();
                } catch (TransactionRolledBackException e) {
                    continue;
                }
                for (Integer seq : batch) {
                    if (!seen.add(seq)) {
                        duplicates.add(seq);
                    }
                }
                if (batch.isEmpty()) {
                    assertEquals(List.of(), duplicates, "messages delivered twice");
                    return seen;
                }
            }
        }
    }
}
