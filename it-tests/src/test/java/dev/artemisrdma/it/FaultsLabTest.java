package dev.artemisrdma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.verbs.VerbsFabric;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;

/**
 * Faults of the real fabric, on rxe1 (10.77.0.2, netdev v1): the port taken down under traffic, left down past the
 * connections' retry budget and brought up again, the device deleted and re-added under a listener and connections,
 * and a memlock limit too low for a non-root user. Each prints what it measured. Whatever happens, the lab is left
 * as found: v1 up, rxe1 present.
 */
@Timeout(value = 170, unit = TimeUnit.SECONDS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class FaultsLabTest {

    private static final String NETDEV = RxeDevice.NETDEV;
    private static final String DEVICE = RxeDevice.DEVICE;
    private static final long FAIL_BOUND_MILLIS = LoadedConnections.FAIL_BOUND_MILLIS;

    // --------------------------------------------------------------------------------------------- tests

    /** Every cause is one of {@code allowed}; at least {@code min} name {@code event} (the idle ends must). */
    private static void assertCauses(List<String> causes, String event, int min, String... allowed) {
        for (String cause : causes) {
            boolean ok = false;
            for (String word : allowed) {
                ok |= cause.contains(word);
            }
            assertTrue(ok, "an expected cause: " + cause);
        }
        long naming = causes.stream().filter(c -> c.contains(event)).count();
        assertTrue(naming >= min, naming + " of " + causes.size() + " causes name " + event + ": " + causes);
    }

    /**
     * A small ACK timeout keeps the retry budget, and so this test, short: 8 x 4.096 us x 2^14 = 537 ms, against
     * 4.3 s at the default 17 (the accepted side's budget assumes 7 retries).
     */
    private static final int SHORT_ACK_TIMEOUT = 14;

    @Test
    @Order(2)
    void aPortThatStaysDownFailsConnectionsWithinTheirRetryBudgetAndAfterUpANewConnectionWorks() throws Exception {
        TransportConfig config = LoadedConnections.config().toBuilder().ackTimeout(SHORT_ACK_TIMEOUT).build();
        long budget = config.retryBudget().toMillis();
        try {
            RdmaResources before = RdmaResources.now();
            try (LoadedConnections s = new LoadedConnections(config, 2, 2, false)) {
                long start = System.nanoTime();
                RxeDevice.sh("ip", "link", "set", NETDEV, "down");
                List<String> causes = s.awaitAllFailed(start);
                long portErr = causes.stream().filter(c -> c.contains("IBV_EVENT_PORT_ERR")).count();
                System.out.println("FaultsLabTest: ip link set " + NETDEV + " down under traffic: all " + causes.size()
                        + " connection ends failed within " + s.slowestMillis + " ms (retry budget " + budget
                        + " ms); " + portErr + " by the port staying down (IBV_EVENT_PORT_ERR), the rest by their "
                        + "queue pairs failing their sends (or their peer's disconnect)");
                // busy ends may fail first by their sends (IBV_WC_RETRY_EXC_ERR once their budget is out, or rxe
                // failing them); idle ends only by the port staying down past their budget
                String stayedDown = "port 1 of RDMA device " + DEVICE + " went down (IBV_EVENT_PORT_ERR) and stayed "
                        + "down for longer than the retry budget of " + budget + " ms";
                assertCauses(causes, stayedDown, 2, "IBV_EVENT_PORT_ERR", "IBV_WC_", "disconnected");
                for (LoadedConnections.End end : s.ends()) {
                    FabricException cause = end.closed.getNow(null);
                    long after = TimeUnit.NANOSECONDS.toMillis(end.closedAtNanos - start);
                    if (cause != null && String.valueOf(cause.getMessage()).contains(stayedDown)) {
                        assertTrue(after >= budget, "an end failed by the port-down " + after + " ms after the port "
                                + "went down, within its retry budget of " + budget + " ms");
                    }
                }
                assertTrue(s.slowestMillis < budget + 1000, "every end failed within the retry budget (" + budget
                        + " ms) plus one second: the slowest after " + s.slowestMillis + " ms");
                // a transport closed while its port is still down gives back its queue pairs and completion queues
                // at once; only the rdma_cm ids (whose destruction sends a DREQ) wait for the port
                s.clientTransport.close();
                s.serverTransport.close();
                RdmaResources portDown = RdmaResources.now();
                System.out.println("FaultsLabTest: transports closed while the port is down: " + portDown
                        + " (before the connections: " + before + ")");
                assertEquals(before.counts().getOrDefault("qp", 0), portDown.counts().getOrDefault("qp", 0),
                        "queue pairs left while the port is down: " + portDown);
                assertEquals(before.counts().getOrDefault("cq", 0), portDown.counts().getOrDefault("cq", 0),
                        "completion queues left while the port is down: " + portDown);
                long upStart = System.nanoTime();
                RxeDevice.sh("ip", "link", "set", NETDEV, "up");
                RxeDevice.restoreAddresses();
                RxeDevice.awaitPortActive();
                long activeMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - upStart);
                long reconnectMs;
                try (RdmaTransport serverAgain = RdmaTransport.create(s.fabric, LoadedConnections.config());
                     RdmaTransport clientAgain = RdmaTransport.create(s.fabric, LoadedConnections.config())) {
                    RdmaServer server = serverAgain.listen(Lab.address(Lab.addr1(), Lab.freshPort()),
                            ch -> new LoadedConnections.End());
                    reconnectMs = LoadedConnections.connectAgain(clientAgain, serverAgain, server, 30_000);
                }
                System.out.println("FaultsLabTest: ip link set " + NETDEV + " up: port ACTIVE after " + activeMs
                        + " ms, a new connection carried a frame " + reconnectMs + " ms later");
            }
        } finally {
            RxeDevice.restoreLab();
        }
    }

    @Test
    @Order(3)
    void deviceDeletedAndReAddedFailsConnectionsAndTheListenerRecoversByItself() throws Exception {
        RdmaResources before = RdmaResources.afterWarmUp(Lab.addr0(), Lab.addr1());
        Process delete = null;
        try {
            try (LoadedConnections s = new LoadedConnections(2, 1, false)) {
                long start = System.nanoTime();
                delete = RxeDevice.startDelete();
                List<String> causes = s.awaitAllFailed(start);
                System.out.println("FaultsLabTest: rdma link delete " + DEVICE + " under traffic: all " + causes.size()
                        + " connection ends failed within " + s.slowestMillis + " ms: " + causes.get(causes.size() - 1));
                assertCauses(causes, "RDMA device " + DEVICE + " was removed", 2, "removed", "IBV_WC_",
                        "disconnected");
                assertTrue(s.slowestMillis < FAIL_BOUND_MILLIS, "failed within " + s.slowestMillis + " ms");
                // the kernel finishes the removal only once this process let go of everything on the device
                if (!delete.waitFor(20, TimeUnit.SECONDS)) {
                    fail("'rdma link delete " + DEVICE + "' still waits after 20 s: something on the device was not "
                            + "released (" + RdmaResources.now() + ")");
                }
                long deletedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                assertEquals(0, delete.exitValue(), new String(delete.getInputStream().readAllBytes(),
                        StandardCharsets.UTF_8));
                System.out.println("FaultsLabTest: the kernel finished removing " + DEVICE + " after " + deletedMs
                        + " ms; the JVM released everything on it: " + RdmaResources.now());
                long addStart = System.nanoTime();
                RxeDevice.add();
                RxeDevice.awaitPortActive();
                long recoveredMs = s.connectAgain(40_000);
                System.out.println("FaultsLabTest: rdma link add " + DEVICE + ": the listener recovered by itself and a "
                        + "new connection carried a frame " + (TimeUnit.NANOSECONDS.toMillis(System.nanoTime()
                        - addStart)) + " ms after the add (" + recoveredMs + " ms after the port was ACTIVE)");
            }
        } finally {
            if (delete != null && delete.isAlive()) {
                // a fresh device list lets librdmacm close what this process still held there
                new VerbsFabric().close();
                delete.waitFor(20, TimeUnit.SECONDS);
            }
            RxeDevice.restoreLab();
        }
        RdmaResources after = RdmaResources.afterWarmUp(Lab.addr0(), Lab.addr1());
        after = RdmaResources.awaitEqual(before, 10_000);
        System.out.println("FaultsLabTest: rdma resource show before " + before + ", after " + after);
        assertEquals(before, after, "rdma resource show counts after the device came back");
    }

    @Test
    @Order(1)
    void aMemlockLimitTooLowForANonRootUserFailsWithAdviceOnWhatToRaise() throws Exception {
        // the classpath lives under /root (mode 700): copy it where user nobody can read it
        Path dir = Files.createTempDirectory(Paths.get(System.getProperty("java.io.tmpdir")), "memlock-");
        StringBuilder cp = new StringBuilder();
        int n = 0;
        for (String entry : System.getProperty("java.class.path").split(java.io.File.pathSeparator)) {
            Path from = Paths.get(entry);
            if (!Files.exists(from)) {
                continue;
            }
            Path to = dir.resolve((n++) + "-" + from.getFileName());
            copy(from, to);
            cp.append(cp.length() == 0 ? "" : java.io.File.pathSeparator).append(to);
        }
        makeReadable(dir);
        try (JavaProcess p = JavaProcess.main(MemlockProbe.class).wrapper("prlimit", "--memlock=65536:65536",
                "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups").property("java.io.tmpdir", dir.toString())
                .classPath(cp.toString()).keepOutput().start(Lab.addr1(), String.valueOf(Lab.freshPort()))) {
            boolean ended = p.awaitExit(60);
            String out = p.output();
            assertTrue(ended, "the probe ended");
            System.out.println("FaultsLabTest: as nobody with memlock 64 KiB: exit " + p.exitValue() + ", "
                    + out.lines().filter(l -> l.startsWith("MemlockProbe")).findFirst().orElse(out));
            assertEquals(MemlockProbe.REFUSED, p.exitValue(), out);
            assertTrue(out.contains("RLIMIT_MEMLOCK") && out.contains("ulimit -l") && out.contains("LimitMEMLOCK"),
                    out);
        }
    }

    // ------------------------------------------------------------------------------------------- helpers

    private static void copy(Path from, Path to) throws IOException {
        if (Files.isDirectory(from)) {
            try (var walk = Files.walk(from)) {
                for (Path p : (Iterable<Path>) walk::iterator) {
                    Path target = to.resolve(from.relativize(p).toString());
                    if (Files.isDirectory(p)) {
                        Files.createDirectories(target);
                    } else {
                        Files.copy(p, target, StandardCopyOption.REPLACE_EXISTING);
                    }
                }
            }
        } else {
            Files.copy(from, to, StandardCopyOption.REPLACE_EXISTING);
        }
    }

    private static void makeReadable(Path dir) throws IOException {
        try (var walk = Files.walk(dir)) {
            for (Path p : (Iterable<Path>) walk::iterator) {
                p.toFile().setReadable(true, false);
                p.toFile().setExecutable(true, false);
                p.toFile().setWritable(true, false);
            }
        }
    }
}
