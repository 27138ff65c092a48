package dev.artemisrdma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

import dev.artemisrdma.it.artemis.LabBroker;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.verbs.VerbsFabric;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.JMSException;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.spi.core.remoting.Acceptor;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;

/**
 * Who owns a native object when teardowns race, on the real rxe fabric: 20 rounds of {@code rdma link delete rxe1}
 * under 50 streaming connections while one of the two transports is closed, and 20 rounds of the broker's RDMA
 * acceptor stopped under sending JMS clients. Every connection must end (a cause, or a local close), the kernel
 * must get every object back ({@code rdma resource show}) and the JVM must not crash: the load runs in this JVM,
 * so a crash ends the run without a report, and no {@code hs_err_pid*.log} may appear meanwhile.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 1200, unit = TimeUnit.SECONDS)
class OwnershipLabTest {

    private static final int ROUNDS = 20;
    private static final int CONNECTIONS = 50;
    private static final int JMS_CONNECTIONS = 10;
    /**
     * When the transport close starts: in the first half of the rounds this many ms after the delete command
     * (negative: before it), long before the removal reaches the connections (about a second later in the lab); in
     * the second half this many ms after the removal first failed a connection, while the rest are still failing.
     */
    private static final int[] CLOSE_OFFSETS_MS = {-10, -4, 0, 5, 20, 0, 2, 5, 10, 20};
    /** How long every end of every connection gets to close after the fault. */
    private static final long END_BOUND_MILLIS = 15_000;

    private long testStart;
    /** The kernel's objects before the test, once librdmacm holds what it keeps for the life of the process. */
    private RdmaResources before;

    @BeforeEach
    void baseline() throws Exception {
        testStart = System.currentTimeMillis();
        before = RdmaResources.afterWarmUp(Lab.addr0(), Lab.addr1());
    }

    @Test
    @Order(1)
    void deviceDeletedUnderLoadWhileATransportClosesReleasesEverything() throws Exception {
        int ends = 0;
        int withCause = 0;
        int closedLocally = 0;
        int closeFirst = 0;
        int removalFirst = 0;
        long slowestTeardown = 0;
        RdmaResources after = before;
        try {
            for (int round = 0; round < ROUNDS; round++) {
                long roundStart = System.nanoTime();
                boolean closeServer = round % 2 == 0;
                int offset = CLOSE_OFFSETS_MS[round / 2];
                boolean afterRemoval = round >= ROUNDS / 2;
                Process delete = null;
                try (LoadedConnections load = new LoadedConnections(CONNECTIONS, 0, true)) {
                    RdmaTransport closing = closeServer ? load.serverTransport : load.clientTransport;
                    List<LoadedConnections.End> closingEnds = load.ends(closeServer);
                    List<LoadedConnections.End> all = load.ends();
                    CountDownLatch go = new CountDownLatch(1);
                    AtomicLong closeBegan = new AtomicLong();
                    AtomicLong closeReturned = new AtomicLong();
                    Thread closer = new Thread(() -> {
                        try {
                            go.await();
                            if (afterRemoval && !load.firstRemoval.await(END_BOUND_MILLIS, TimeUnit.MILLISECONDS)) {
                                System.out.println("OwnershipLabTest: no connection failed by the removal within "
                                        + END_BOUND_MILLIS + " ms; closing anyway");
                            }
                            Thread.sleep(Math.max(0, offset));
                            closeBegan.set(System.nanoTime());
                            closing.close();
                            closeReturned.set(System.nanoTime());
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }, "closer-" + (round + 1));
                    long start = System.nanoTime();
                    go.countDown();
                    closer.start();
                    if (offset < 0) {
                        Thread.sleep(-offset);
                    }
                    delete = RxeDevice.startDelete();
                    long lastEnd = start;
                    int roundCause = 0;
                    int closingWithCause = 0;
                    for (LoadedConnections.End end : all) {
                        FabricException cause;
                        try {
                            cause = end.closed.get(Math.max(1, END_BOUND_MILLIS
                                    - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)), TimeUnit.MILLISECONDS);
                        } catch (TimeoutException e) {
                            fail(hang("round " + (round + 1) + ": a connection end saw no onClosed within "
                                    + END_BOUND_MILLIS
                                    + " ms (" + (closeServer ? "server" : "client") + " transport closed "
                                    + offset + " ms after the delete)"));
                            return;
                        }
                        ends++;
                        lastEnd = Math.max(lastEnd, end.closedAtNanos);
                        if (cause == null) {
                            closedLocally++;
                        } else {
                            withCause++;
                            roundCause++;
                        }
                    }
                    closer.join(END_BOUND_MILLIS);
                    if (closer.isAlive()) {
                        fail(hang("round " + (round + 1) + ": RdmaTransport.close() of the "
                                + (closeServer ? "server" : "client") + " transport did not return within "
                                + END_BOUND_MILLIS + " ms"));
                    }
                    if (!delete.waitFor(20, TimeUnit.SECONDS)) {
                        fail(hang("round " + (round + 1) + ": 'rdma link delete " + RxeDevice.DEVICE
                                + "' still waits after "
                                + "20 s: something on the device was not released (" + RdmaResources.now() + ")"));
                    }
                    assertEquals(0, delete.exitValue(), "rdma link delete: "
                            + new String(delete.getInputStream().readAllBytes()));
                    long teardown = TimeUnit.NANOSECONDS.toMillis(Math.max(lastEnd, closeReturned.get()) - start);
                    slowestTeardown = Math.max(slowestTeardown, teardown);
                    // which came first for the closed transport: its own close (every end closed locally) or the
                    // removal (some of its ends failed with a cause)
                    for (LoadedConnections.End end : closingEnds) {
                        if (end.closed.getNow(null) != null) {
                            closingWithCause++;
                        }
                    }
                    for (LoadedConnections.End end : all) {
                        assertEquals(1, end.closedCalls.get(), "onClosed calls of one connection end");
                    }
                    // the order: when the close began against when the removal first failed a connection
                    long removalSeen = Long.MAX_VALUE;
                    for (LoadedConnections.End end : all) {
                        FabricException cause = end.closed.getNow(null);
                        if (cause != null && String.valueOf(cause.getMessage()).contains("was removed")) {
                            removalSeen = Math.min(removalSeen, end.closedAtNanos);
                        }
                    }
                    long closeLead = removalSeen == Long.MAX_VALUE ? Long.MAX_VALUE
                            : TimeUnit.NANOSECONDS.toMillis(removalSeen - closeBegan.get());
                    if (closeLead > 0) {
                        closeFirst++;
                    } else {
                        removalFirst++;
                    }
                    System.out.println("OwnershipLabTest: round " + (round + 1) + ": " + (closeServer ? "server"
                            : "client") + " transport closed " + offset + " ms after the "
                            + (afterRemoval ? "removal's first failure, " : "delete command, ")
                            + (closeLead == Long.MAX_VALUE ? "no end failed by the removal"
                            : Math.abs(closeLead) + " ms " + (closeLead > 0 ? "before" : "after")
                            + " the removal first failed a connection") + "; " + all.size() + " ends closed ("
                            + roundCause + " with a cause, " + closingWithCause + " of the closed transport's)"
                            + " within " + teardown + " ms; round took "
                            + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - roundStart) + " ms");
                } finally {
                    if (delete != null && delete.isAlive()) {
                        new VerbsFabric().close(); // a rescan lets librdmacm close what this process held there
                        delete.waitFor(20, TimeUnit.SECONDS);
                    }
                    RxeDevice.restoreLab(); // adds rxe1 back, waits for its port, GID and rdma_cm
                }
                after = RdmaResources.awaitEqual(before, 10_000);
                assertEquals(before, after, "rdma resource show after round " + (round + 1)
                        + " with rxe1 re-added");
            }
        } finally {
            RxeDevice.restoreLab();
        }
        String crashes = hsErrFiles(testStart);
        System.out.println("OwnershipLabTest: SUMMARY device deleted under load: " + ROUNDS + " rounds of 'rdma link "
                + "delete " + RxeDevice.DEVICE + "' under " + CONNECTIONS + " streaming connections racing a transport "
                + "close (server/client alternating, close " + CLOSE_OFFSETS_MS[0] + ".." + CLOSE_OFFSETS_MS[
                ROUNDS / 4 - 1] + " ms after the delete command or 0.." + CLOSE_OFFSETS_MS[ROUNDS / 2 - 1]
                + " ms after "
                + "the removal first failed a connection; the close began before the removal "
                + "failed a connection in " + closeFirst + " rounds, after it in " + removalFirst + "): " + ends
                + " connection ends, "
                + withCause + " failed with a cause, " + closedLocally + " closed locally, 0 left open; slowest "
                + "teardown " + slowestTeardown + " ms; rdma resource show before " + before + ", after " + after
                + "; hs_err files: " + (crashes.isEmpty() ? "none" : crashes) + "; took "
                + (System.currentTimeMillis() - testStart) / 1000 + " s");
        assertEquals(ROUNDS * CONNECTIONS * 2, ends);
        assertEquals("", crashes, "hs_err files written during the test");
    }

    @Test
    @Order(2)
    void acceptorStoppedUnderLoadFailsEveryClientAndReleasesEverything() throws Exception {
        int port = Lab.freshPort();
        long sent = 0;
        long slowestStop = 0;
        long slowestFailure = 0;
        int failed = 0;
        RdmaResources brokerFirst;
        RdmaResources brokerLast;
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try (LabBroker broker = LabBroker.start(Lab.addr0(), port, Files.createTempDirectory("ownership-broker"),
                false, 0)) {
            Acceptor acceptor = broker.server().getRemotingService().getAcceptor("rdma");
            try (ActiveMQConnectionFactory cf = new ActiveMQConnectionFactory(false, new TransportConfiguration(
                    "dev.artemisrdma.artemis.RdmaConnectorFactory", Map.of("host", Lab.addr0(), "port", port)))) {
                new Sender(cf, -1).close();
                brokerFirst = settled();
                for (int round = 0; round < ROUNDS; round++) {
                    long roundStart = System.nanoTime();
                    List<Future<Sender>> opening = new ArrayList<>();
                    for (int i = 0; i < JMS_CONNECTIONS; i++) {
                        int id = round * JMS_CONNECTIONS + i;
                        opening.add(pool.submit(() -> new Sender(cf, id)));
                    }
                    List<Sender> senders = new ArrayList<>();
                    for (Future<Sender> f : opening) {
                        senders.add(f.get(60, TimeUnit.SECONDS));
                    }
                    for (Sender s : senders) {
                        s.awaitSent(20, 20_000);
                    }
                    long start = System.nanoTime();
                    acceptor.stop();
                    long stopMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                    slowestStop = Math.max(slowestStop, stopMs);
                    long roundSlowest = 0;
                    Set<String> causes = new LinkedHashSet<>();
                    for (Sender s : senders) {
                        if (!s.failure.await(Math.max(1, END_BOUND_MILLIS
                                - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start)), TimeUnit.MILLISECONDS)) {
                            fail(hang("round " + (round + 1) + ": client connection " + s.id + " got no failure within "
                                    + END_BOUND_MILLIS + " ms of the acceptor's stop"));
                        }
                        assertTrue(s.cause != null && (s.cause.getCause() != null
                                || s.cause.getLinkedException() != null), "a failure with a cause: " + s.cause);
                        causes.add(String.valueOf(s.cause.getErrorCode()) + " " + s.cause.getMessage());
                        roundSlowest = Math.max(roundSlowest, TimeUnit.NANOSECONDS.toMillis(s.failedAtNanos - start));
                        failed++;
                    }
                    slowestFailure = Math.max(slowestFailure, roundSlowest);
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                    while (broker.server().getConnectionCount() > 0 && System.nanoTime() < deadline) {
                        Thread.sleep(20);
                    }
                    assertEquals(0, broker.server().getConnectionCount(), "broker connections after the stop");
                    for (Sender s : senders) {
                        sent += s.sent.get();
                        s.close();
                    }
                    acceptor.start();
                    System.out.println("OwnershipLabTest: round " + (round + 1) + ": acceptor stopped in " + stopMs
                            + " ms under " + JMS_CONNECTIONS + " sending connections; all failed within "
                            + roundSlowest + " ms: " + causes + "; round took "
                            + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - roundStart) + " ms");
                }
                brokerLast = settled();
            }
        } finally {
            pool.shutdownNow();
        }
        // the broker stopped and the client factory closed: the shared transport is gone, and everything with it
        RdmaResources after = RdmaResources.awaitEqual(before, 20_000);
        String crashes = hsErrFiles(testStart);
        System.out.println("OwnershipLabTest: SUMMARY acceptor stopped under load: " + ROUNDS + " rounds of the "
                + "broker's RDMA acceptor stopped and restarted under " + JMS_CONNECTIONS + " JMS connections sending "
                + "(" + sent + " messages in all): " + failed + " of " + ROUNDS * JMS_CONNECTIONS + " client "
                + "connections failed with a cause (ExceptionListener), slowest " + slowestFailure + " ms after the "
                + "stop began; slowest acceptor stop " + slowestStop + " ms; rdma resource show before the broker "
                + before + ", after it stopped " + after + " (with the broker up: after a warm-up connection "
                + brokerFirst + ", after round " + ROUNDS + " " + brokerLast + "); hs_err files: "
                + (crashes.isEmpty() ? "none" : crashes) + "; took "
                + (System.currentTimeMillis() - testStart) / 1000 + " s");
        assertEquals(before, after, "rdma resource show after " + ROUNDS + " acceptor stops and the broker's stop");
        assertEquals("", crashes, "hs_err files written during the test");
    }

    /** One JMS connection whose thread sends 1 KiB non-persistent messages until it fails or is closed. */
    private static final class Sender implements AutoCloseable {
        final int id;
        final Connection connection;
        final CountDownLatch failure = new CountDownLatch(1);
        final AtomicLong sent = new AtomicLong();
        final Thread thread;
        volatile JMSException cause;
        volatile long failedAtNanos;
        volatile boolean stop;

        /** With {@code id < 0} one message is sent and no thread started. */
        Sender(ActiveMQConnectionFactory cf, int id) throws JMSException {
            this.id = id;
            connection = cf.createConnection();
            connection.setExceptionListener(e -> {
                failedAtNanos = System.nanoTime();
                cause = e;
                failure.countDown();
            });
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = session.createProducer(session.createTopic("ownership.load"));
            producer.setDeliveryMode(jakarta.jms.DeliveryMode.NON_PERSISTENT);
            BytesMessage message = session.createBytesMessage();
            message.writeBytes(new byte[1024]);
            if (id < 0) {
                producer.send(message);
                thread = null;
                return;
            }
            thread = new Thread(() -> {
                try {
                    while (!stop) {
                        producer.send(message);
                        sent.incrementAndGet();
                    }
                } catch (JMSException | RuntimeException e) {
                    // the connection failed or was closed
                }
            }, "sender-" + id);
            thread.setDaemon(true);
            thread.start();
        }

        void awaitSent(long count, long timeoutMillis) throws InterruptedException {
            long deadline = System.currentTimeMillis() + timeoutMillis;
            while (sent.get() < count && System.currentTimeMillis() < deadline) {
                Thread.sleep(5);
            }
            assertTrue(sent.get() >= count, "connection " + id + " sends before the stop: " + sent.get());
        }

        @Override
        public void close() throws Exception {
            stop = true;
            connection.close();
            if (thread != null) {
                thread.join(10_000);
                if (thread.isAlive()) {
                    fail(hang("sender " + id + " still blocked 10 s after its connection closed"));
                }
            }
        }
    }

    /** The counts once they held still for a second (a client transport may linger after its last connection). */
    private static RdmaResources settled() throws InterruptedException {
        RdmaResources last = RdmaResources.now();
        long stableSince = System.currentTimeMillis();
        long deadline = stableSince + 20_000;
        while (System.currentTimeMillis() - stableSince < 1_000 && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
            RdmaResources now = RdmaResources.now();
            if (!now.equals(last)) {
                last = now;
                stableSince = System.currentTimeMillis();
            }
        }
        return last;
    }

    /** The hs_err files that a crashing JVM of this run would have left (working dir, tmpdir, /tmp). */
    private static String hsErrFiles(long sinceMillis) {
        Set<String> dirs = new LinkedHashSet<>(List.of(System.getProperty("user.dir"),
                System.getProperty("java.io.tmpdir"), "/tmp"));
        StringBuilder found = new StringBuilder();
        for (String dir : dirs) {
            File[] files = new File(dir).listFiles((d, name) -> name.startsWith("hs_err") && name.endsWith(".log"));
            for (File f : files == null ? new File[0] : files) {
                if (f.lastModified() >= sinceMillis) {
                    found.append(f).append(' ');
                }
            }
        }
        return found.toString().trim();
    }

    /** {@code what}, printed with the stacks of this JVM's threads, for a hang to be read from the log. */
    private static String hang(String what) {
        StringBuilder b = new StringBuilder("OwnershipLabTest: HANG: ").append(what).append('\n');
        b.append(Stacks.of(""));
        try {
            b.append("  rdma resource show: ").append(RdmaResources.now());
        } catch (RuntimeException ex) {
            b.append("  rdma resource show failed: ").append(ex.getMessage());
        }
        System.out.println(b);
        return what;
    }
}
