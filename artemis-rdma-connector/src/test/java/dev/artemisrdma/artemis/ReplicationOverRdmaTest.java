package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.Hashtable;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import jakarta.jms.TransactionRolledBackException;
import javax.naming.Context;
import javax.naming.InitialContext;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.api.core.client.FailoverEventType;
import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.jms.client.ActiveMQConnection;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A primary and its backup from {@code config/pairs/primary.xml} and {@code backup.xml} in one JVM, on the in-memory
 * fabric, the primary's acceptor with a 64 KiB {@code writeHighWaterMark} so that replication runs into
 * back-pressure all the time: the initial sync (journal, large messages, a paged address) and live replication go
 * over RDMA, a client whose connection factory comes from JNDI ({@code rdma://P?ha=true&reconnectAttempts=-1#rdma://B})
 * learns the backup's RDMA connector from the topology and fails over to it when the primary dies, and every
 * committed message is there exactly once.
 */
class ReplicationOverRdmaTest {

    private static final String HOST = "127.0.0.1";
    private static final int PRIMARY = 61781;
    private static final int BACKUP = 61782;

    @TempDir
    Path dataDir;

    @BeforeAll
    static void fabric() {
        TestRuntime.install();
    }

    private EmbeddedBroker node(String file, int port, int peerPort) throws Exception {
        Configuration config = EmbeddedBroker.testable(EmbeddedBroker.read("pairs/" + file, Map.of(
                "rdma.host", HOST, "rdma.port", Integer.toString(port),
                "rdma.peer.host", HOST, "rdma.peer.port", Integer.toString(peerPort))), dataDir.resolve(file));
        config.setPersistenceEnabled(true);
        config.getAddressSettings().get("paged.#").setMaxSizeBytes(256 * 1024).setPageSizeBytes(64 * 1024);
        for (TransportConfiguration acceptor : config.getAcceptorConfigurations()) {
            acceptor.getExtraParams().put("writeHighWaterMark", "64k");
        }
        return EmbeddedBroker.start(config, EmbeddedBroker.configDir().resolve("pairs/replication.properties")
                .toString());
    }

    @Test
    void backupSyncsOverRdmaAndTheClientFailsOverToItsRdmaConnector() throws Exception {
        EmbeddedBroker primary = node("primary.xml", PRIMARY, BACKUP);
        EmbeddedBroker backup = null;
        Hashtable<String, Object> jndi = new Hashtable<>(); // as an unchanged JMS application gets it
        jndi.put(Context.INITIAL_CONTEXT_FACTORY, RdmaInitialContextFactory.class.getName());
        jndi.put("connectionFactory.ha", "rdma://" + HOST + ":" + PRIMARY
                + "?ha=true&reconnectAttempts=-1&retryInterval=100#rdma://" + HOST + ":" + BACKUP);
        InitialContext context = new InitialContext(jndi);
        try (ActiveMQConnectionFactory cf = (ActiveMQConnectionFactory) context.lookup("ha");
             Connection connection = cf.createConnection()) {
            CountDownLatch failedOver = new CountDownLatch(1);
            ((ActiveMQConnection) connection).setFailoverListener(event -> {
                if (event == FailoverEventType.FAILOVER_COMPLETED) {
                    failedOver.countDown();
                }
            });
            connection.start();
            Session session = connection.createSession(true, Session.SESSION_TRANSACTED);
            Queue plain = session.createQueue("ha.orders");
            Queue paged = session.createQueue("paged.orders");
            send(session, plain, 0, 300, 256);
            send(session, paged, 0, 100, 8 * 1024); // 800 KiB through a 256 KiB address: pages
            send(session, plain, 300, 3, 300 * 1024); // large messages (files of their own)
            assertTrue(primary.server().getPagingManager().getPageStore(
                    org.apache.activemq.artemis.api.core.SimpleString.of("paged.orders")).isPaging(),
                    "the paged address did not page");

            backup = node("backup.xml", BACKUP, PRIMARY);
            awaitReplicaSync(backup.server());
            assertInstanceOf(RdmaConnection.class,
                    primary.server().getReplicationManager().getBackupTransportConnection().getTransportConnection(),
                    "replication does not run over RDMA");
            send(session, plain, 303, 200, 256); // live replication
            awaitBackupInTopology(cf);

            primary.server().fail(true);
            assertTrue(backup.server().waitForActivation(30, TimeUnit.SECONDS), "the backup did not take over");
            assertTrue(failedOver.await(30, TimeUnit.SECONDS), "the client did not fail over");

            assertEquals(expected(503), receiveAll(session, plain), "plain queue after failover");
            assertEquals(expected(100), receiveAll(session, paged), "paged queue after failover");
        } finally {
            context.close();
            if (backup != null) {
                backup.close();
            }
            primary.close();
        }
    }

    private static Set<Integer> expected(int count) {
        Set<Integer> all = new TreeSet<>();
        for (int i = 0; i < count; i++) {
            all.add(i);
        }
        return all;
    }

    private static void send(Session session, Queue queue, int first, int count, int size) throws Exception {
        MessageProducer producer = session.createProducer(queue);
        producer.setDeliveryMode(DeliveryMode.PERSISTENT);
        byte[] body = new byte[size];
        for (int i = first; i < first + count; i++) {
            BytesMessage m = session.createBytesMessage();
            m.writeBytes(body);
            m.setIntProperty("seq", i);
            producer.send(m);
            if ((i + 1) % 50 == 0) {
                session.commit();
            }
        }
        session.commit();
        producer.close();
    }

    /** Receives until the queue is empty; a transaction rolled back by the failover is received again. */
    private static Set<Integer> receiveAll(Session session, Queue queue) throws Exception {
        Set<Integer> seen = new TreeSet<>();
        try (MessageConsumer consumer = session.createConsumer(queue)) {
            while (true) {
                Set<Integer> batch = new TreeSet<>();
                Message m;
                while (batch.size() < 20 && (m = consumer.receive(2_000)) != null) {
                    assertTrue(batch.add(m.getIntProperty("seq")), "duplicate in a batch");
                }
                try {
                    session.commit();
                } catch (TransactionRolledBackException e) {
                    continue;
                }
                for (Integer seq : batch) {
                    assertTrue(seen.add(seq), "message " + seq + " delivered twice");
                }
                if (batch.isEmpty()) {
                    return seen;
                }
            }
        }
    }

    private static void awaitReplicaSync(ActiveMQServer backup) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!backup.isReplicaSync() && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        assertTrue(backup.isReplicaSync(), "the backup never finished its initial sync");
    }

    private static void awaitBackupInTopology(ActiveMQConnectionFactory cf) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            var members = cf.getServerLocator().getTopology().getMembers();
            if (members.stream().anyMatch(m -> m.getBackup() != null)) {
                TransportConfiguration backupConnector = members.iterator().next().getBackup();
                assertNotNull(backupConnector);
                assertEquals(RdmaConnectorFactory.class.getName(), backupConnector.getFactoryClassName());
                return;
            }
            Thread.sleep(50);
        }
        throw new AssertionError("the client never learned the backup: " + cf.getServerLocator().getTopology()
                .describe());
    }
}
