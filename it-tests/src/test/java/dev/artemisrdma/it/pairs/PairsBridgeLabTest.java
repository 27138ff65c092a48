package dev.artemisrdma.it.pairs;

import static dev.artemisrdma.it.pairs.PairBroker.props;
import static dev.artemisrdma.it.pairs.PairsClusterLabTest.elapsedMillis;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.it.Lab;
import dev.artemisrdma.it.RdmaResources;
import dev.artemisrdma.it.hosts.LabHost;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Site A's queue bridged to site B over RDMA ({@code config/pairs/bridge-source.xml}, {@code bridge-target.xml}), as
 * processes: B is SIGKILLed in the middle of the stream and started again; the bridge reconnects by itself and every
 * durable message reaches B exactly once (duplicate detection drops what A sends again). B's only acceptor is RDMA
 * and every connection it accepted, the bridge's among them, is RDMA. Count: {@code -Dpairs.bridge.messages} (CI
 * 2,000; it-tests/bench/pairs-bench runs the 5,000). {@link CrossWireBridgeLabTest} runs the same scenario with
 * site B on host B of the two-host lab (outside CI: it-tests/bench/wire-pairs).
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class PairsBridgeLabTest {

    /** The messages sent to site A, each bridged to site B and consumed there once. */
    static final int MESSAGES = Integer.getInteger("pairs.bridge.messages", 2_000);

    @Test
    void bridgeReconnectsOverRdmaAfterItsTargetWasKilled() throws Exception {
        RdmaResources baseline = PairsLab.baseline();
        run(Lab.addr0(), Lab.addr1(), null);
        PairsLab.assertResourcesBack(baseline);
    }

    /**
     * The scenario with site A on {@code sourceAddr} of this host and site B on {@code targetAddr} of
     * {@code targetHost} (null: this host), so that the bridge can cross the two-host lab's wire
     * ({@link CrossWireBridgeLabTest}); this JVM's clients reach both sites.
     */
    static void run(String sourceAddr, String targetAddr, LabHost targetHost) throws Exception {
        int portA = Lab.freshPort();
        int portB = Lab.freshPort();
        Path data = Files.createTempDirectory("pairs-bridge");
        try (PairBroker b = PairBroker.start("site-b", "bridge-target.xml", data.resolve("b"), false, props(
                "rdma.host", targetAddr, "rdma.port", "" + portB), null, targetHost);
             PairBroker a = PairBroker.start("site-a", "bridge-source.xml", data.resolve("a"), false, props(
                "rdma.host", sourceAddr, "rdma.port", "" + portA,
                "rdma.peer.host", targetAddr, "rdma.peer.port", "" + portB))) {
            b.await("the bridge connected", r -> Integer.parseInt(r.get("peerSessionsRdma")) >= 1, 120);
            long start = System.nanoTime();
            try (ActiveMQConnectionFactory onA = RdmaConnectionFactories.create("rdma://" + sourceAddr + ":" + portA);
                 Connection toA = onA.createConnection()) {
                Session session = toA.createSession(true, Session.SESSION_TRANSACTED);
                Queue queue = session.createQueue("bridge.orders");
                MessageProducer producer = session.createProducer(queue);
                producer.setDeliveryMode(DeliveryMode.PERSISTENT);
                for (int i = 0; i < MESSAGES; i++) {
                    TextMessage m = session.createTextMessage("order " + i);
                    m.setIntProperty("seq", i);
                    producer.send(m);
                    if ((i + 1) % 50 == 0) {
                        session.commit();
                    }
                    if (i == MESSAGES / 2) {
                        b.kill(); // mid-stream: the bridge has messages in flight and unconfirmed
                        System.out.printf("site B killed after %d messages%n", i);
                    } else if (i == 3 * MESSAGES / 4) {
                        b.restart();
                        System.out.printf("site B restarted after %d messages%n", i);
                    }
                }
                session.commit();
            }
            Set<Integer> received = new TreeSet<>();
            List<Integer> duplicates = new ArrayList<>();
            try (ActiveMQConnectionFactory onB = RdmaConnectionFactories.create("rdma://" + targetAddr + ":" + portB);
                 Connection toB = onB.createConnection()) {
                toB.start();
                Session session = toB.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageConsumer consumer = session.createConsumer(session.createQueue("bridge.orders"));
                PairsLab.receiveEachOnce(consumer, MESSAGES, received, duplicates, m -> { });
            }
            System.out.printf("%d messages bridged across a killed and restarted site B in %d ms%n", received.size(),
                    elapsedMillis(start));
            assertEquals(List.of(), duplicates, "messages delivered twice");
            Set<Integer> expected = new TreeSet<>();
            for (int i = 0; i < MESSAGES; i++) {
                expected.add(i);
            }
            assertEquals(expected, received, "messages lost");
            Map<String, String> targetReport = b.report();
            PairsClusterLabTest.assertLinksOnRdma(targetReport, 1);
            Map<String, String> sourceReport = a.report();
            System.out.println("site A: " + sourceReport);
            assertEquals("target:RdmaConnectorFactory", sourceReport.get("connectors"));
            assertEquals("0", sourceReport.get("inboundOther"));
            PairsLab.assertNoNettyAttempt(a, b);
        }
    }
}
