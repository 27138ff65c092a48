package dev.artemisrdma.it.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.Lab;
import dev.artemisrdma.it.RdmaResources;
import jakarta.jms.Connection;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * SIGKILL of a client process: the kernel tears its rdma_cm ids down, the broker hears the disconnect and frees the
 * connection within seconds (not a connection-TTL minute later), and the kernel's count of queue pairs, cm ids and
 * completion queues is back where it was.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class ClientKillLabTest {

    @Test
    void aKilledClientsConnectionIsFreedWithinSeconds() throws Exception {
        int port = Lab.freshPort();
        String url = "rdma://" + Lab.addr0() + ":" + port + "?reconnectAttempts=0";
        try (LabBroker broker = LabBroker.start(Lab.addr0(), port, Files.createTempDirectory("client-kill"), false,
                0)) {
            // one connection in and out first: the broker's completion loop and send slabs exist from then on
            try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create(url);
                 Connection warmUp = cf.createConnection()) {
                warmUp.start();
            }
            awaitConnections(broker, 0, 10_000);
            Map<String, Integer> before = kernelObjects(RdmaResources.now());

            JavaProcess client = JavaProcess.main(ConnectedClientMain.class).jvm("-Xmx1g", "-XX:TieredStopAtLevel=1")
                    .readyWhen(ConnectedClientMain.READY, 180).echo(line -> true).start(url, "killed.client");
            try {
                awaitConnections(broker, 1, 10_000);
                long killedAt = System.nanoTime();
                client.kill();
                long freedMillis = awaitConnections(broker, 0, 15_000) - killedAt;
                System.out.println("broker freed the killed client's connection after "
                        + TimeUnit.NANOSECONDS.toMillis(freedMillis) + " ms");
                assertTrue(freedMillis < TimeUnit.SECONDS.toNanos(10), "took "
                        + TimeUnit.NANOSECONDS.toMillis(freedMillis) + " ms");
            } finally {
                client.close();
            }
            Map<String, Integer> after = kernelObjects(RdmaResources.now());
            long deadline = System.currentTimeMillis() + 20_000;
            while (!after.equals(before) && System.currentTimeMillis() < deadline) {
                Thread.sleep(100);
                after = kernelObjects(RdmaResources.now());
            }
            assertEquals(before, after, "queue pairs, cm ids and completion queues after the kill");
        }
    }

    /** Waits until the broker has {@code expected} connections; returns System.nanoTime() then. */
    private static long awaitConnections(LabBroker broker, int expected, long timeoutMillis) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        while (broker.server().getConnectionCount() != expected) {
            assertTrue(System.nanoTime() < deadline, "the broker has " + broker.server().getConnectionCount()
                    + " connections, expected " + expected + " within " + timeoutMillis + " ms");
            Thread.sleep(20);
        }
        return System.nanoTime();
    }

    /**
     * The objects a connection owns (qp, cm_id, cq); registered memory is left out: idle send slabs are deregistered
     * after 30 s, which may fall inside the test and lower the count below the baseline.
     */
    private static Map<String, Integer> kernelObjects(RdmaResources resources) {
        Map<String, Integer> objects = new TreeMap<>(resources.counts());
        objects.keySet().retainAll(java.util.Set.of("qp", "cm_id", "cq"));
        return objects;
    }
}
