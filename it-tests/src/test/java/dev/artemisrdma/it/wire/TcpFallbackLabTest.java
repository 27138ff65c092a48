package dev.artemisrdma.it.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.artemis.LabBroker;
import dev.artemisrdma.it.hosts.LabHost;
import dev.artemisrdma.it.hosts.WireCounters;
import org.apache.activemq.artemis.spi.core.protocol.RemotingConnection;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The TCP fall-back README documents ({@code rdma://broker:61700#tcp://broker:61616}) between two hosts, with the
 * real libraries: a broker on host A with an RDMA and a Netty TCP acceptor, and the same client URL on host B, once
 * while B has its RDMA device and once after B's device is deleted ({@code rdma link delete}: a host with librdmacm
 * but no RDMA device, as a client machine without an RDMA NIC is). With the device every connection is RDMA; without
 * it every one is TCP, each message exactly once, the client's log says why RDMA was not used, and A's rxe counts no
 * packet of it. The broker's own connection table says which transport carried each connection.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class TcpFallbackLabTest {

    private static final int RDMA_PORT = 61651;
    private static final int TCP_PORT = 61652;
    private static final int COUNT = 100;

    private static LabBroker broker;

    @BeforeAll
    static void startBroker() throws Exception {
        LabHost.requireTwoHosts();
        broker = LabBroker.start(LabHost.a().wireAddress(), RDMA_PORT, Files.createTempDirectory("fallback-broker"),
                false, TCP_PORT);
    }

    @AfterAll
    static void stopBroker() throws Exception {
        if (broker != null) {
            broker.close();
        }
    }

    private static String url() {
        String a = LabHost.a().wireAddress();
        return "rdma://" + a + ":" + RDMA_PORT + "#tcp://" + a + ":" + TCP_PORT;
    }

    @Test
    void aClientWithAnRdmaDeviceUsesRdmaAndOneWithoutFallsBackToTcpExactlyOnce() throws Exception {
        // B with its device: RDMA carries every connection and its packets cross both NICs through rxe
        WireCounters a0 = LabHost.a().counters();
        Served rdma = serve("fallback.rdma");
        WireCounters a = LabHost.a().counters().since(a0);
        System.out.println("host B with rxe0: " + rdma + "; " + a.summary());
        assertEquals(Set.of("RdmaConnection"), rdma.kinds, rdma.toString());
        a.requireRoceCrossedTheWire(COUNT);

        // B without an RDMA device: librdmacm finds none, the connector says so, and the locator goes on to TCP
        String restore = "rdma link add " + LabHost.RDMA_DEVICE + " type rxe netdev " + LabHost.WIRE_NIC;
        LabHost.b().sh("rdma link delete " + LabHost.RDMA_DEVICE);
        try {
            assertTrue(LabHost.b().run("ibv_devices | grep -c " + LabHost.RDMA_DEVICE, 30).output().strip()
                    .equals("0"), "host B still lists " + LabHost.RDMA_DEVICE);
            WireCounters before = LabHost.a().counters();
            Served tcp = serve("fallback.tcp");
            WireCounters after = LabHost.a().counters().since(before);
            System.out.println("host B without an RDMA device: " + tcp + "; " + after.summary());
            assertEquals(Set.of("NettyServerConnection"), tcp.kinds, tcp.toString());
            assertTrue(tcp.output.stream().anyMatch(l -> l.contains("no RDMA device found")),
                    "the client's log does not say why RDMA was not used: " + tcp.output);
            // RDMA carried nothing: A's rxe neither sent nor received, while its NIC carried the TCP traffic
            assertEquals(0, after.rxe("sent_pkts") + after.rxe("rcvd_pkts"), "rxe on A moved packets: " + after);
            assertTrue(after.nic("rx_packets") > COUNT, "the TCP traffic did not cross A's NIC: " + after);
        } finally {
            LabHost.b().sh(restore + " && for i in $(seq 50); do rdma link show " + LabHost.RDMA_DEVICE
                    + "/1 | grep -q ACTIVE && exit 0; sleep 0.2; done; echo 'rxe0 not ACTIVE'; exit 1");
        }
        // and the device back, the same URL is RDMA again
        Served again = serve("fallback.again");
        assertEquals(Set.of("RdmaConnection"), again.kinds, again.toString());
    }

    /** Runs {@link WireJmsMain} on host B with {@link #url()}: every message exactly once; the kinds of connection. */
    private static Served serve(String queue) throws Exception {
        Set<Object> before = broker.server().getRemotingService().getConnections().stream()
                .map(RemotingConnection::getID).collect(Collectors.toSet());
        Set<String> kinds = ConcurrentHashMap.newKeySet();
        Thread watcher = new Thread(() -> {
            // the client's connections live only while it runs: read the broker's table every 50 ms
            while (!Thread.currentThread().isInterrupted()) {
                for (RemotingConnection c : broker.server().getRemotingService().getConnections()) {
                    if (!before.contains(c.getID())) {
                        kinds.add(c.getTransportConnection().getClass().getSimpleName());
                    }
                }
                try {
                    Thread.sleep(50);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "fallback-watch");
        watcher.start();
        try (JavaProcess client = JavaProcess.driven(queue, WireJmsMain.class).on(LabHost.b()).jvm("-Xmx512m")
                .keepOutput().echo(line -> line.startsWith("RESULT") || line.contains("ERROR"), 20)
                .start(url(), queue, Integer.toString(COUNT), "31")) {
            Map<String, Long> r = WireJmsMain.result(client.await("RESULT", 300));
            assertEquals(COUNT, r.get("received"), queue + ": " + r);
            assertEquals(0, r.get("lost") + r.get("duplicated") + r.get("bad") + r.get("failures"), queue + ": " + r);
            return new Served(Set.copyOf(kinds), r, client.keptSince(0));
        } finally {
            watcher.interrupt();
            watcher.join();
        }
    }

    private record Served(Set<String> kinds, Map<String, Long> result, List<String> output) {
        @Override
        public String toString() {
            return "connections " + kinds + ", " + result;
        }
    }
}
