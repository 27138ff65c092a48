package dev.artemisrdma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.artemisrdma.transport.ChannelHandler;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.RdmaChannel;
import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.TransportConfig;
import dev.artemisrdma.transport.verbs.VerbsFabric;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;

/**
 * Faults of the real fabric, on rxe1 (10.77.0.2, netdev v1): the port taken down and up under traffic, the device
 * deleted and re-added under a listener and connections, and a memlock limit too low for a non-root user. Each
 * prints what it measured. Whatever happens, the lab is left as found: v1 up, rxe1 present.
 */
@Timeout(value = 170, unit = TimeUnit.SECONDS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class FaultsLabTest {

    private static final String NETDEV = "v1";
    private static final String DEVICE = "rxe1";
    /** How long a port or device fault may take to fail every connection on it. */
    private static final long FAIL_BOUND_MILLIS = 5_000;

    private static TransportConfig config() {
        return TransportConfig.defaults().toBuilder().receiveSlots(16).slotSize(4096)
                .connectTimeout(java.time.Duration.ofSeconds(5)).build();
    }

    /** One side of a connection: counts frames, records when and why it closed. */
    private static final class Side implements ChannelHandler {
        final AtomicLong frames = new AtomicLong();
        final CompletableFuture<FabricException> closed = new CompletableFuture<>();
        volatile long closedAtNanos;

        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            frames.incrementAndGet();
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
            closedAtNanos = System.nanoTime();
            closed.complete(cause);
        }
    }

    /** A writer that keeps one channel busy with 1 KiB frames until it fails. */
    private static Thread traffic(RdmaChannel channel) {
        Thread t = new Thread(() -> {
            ByteBuffer frame = ByteBuffer.allocate(1024);
            while (channel.isOpen()) {
                try {
                    if (channel.isWritable()) {
                        channel.write(frame.clear(), true);
                    } else {
                        Thread.sleep(1);
                    }
                } catch (FabricException | IllegalStateException e) {
                    return;
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "traffic-" + channel.id());
        t.setDaemon(true);
        t.start();
        return t;
    }

    /** Server and client transports on one fabric, N connections with traffic, all through rxe1. */
    private static final class Setup implements AutoCloseable {
        final VerbsFabric fabric = new VerbsFabric();
        final RdmaTransport serverTransport = RdmaTransport.create(fabric, config());
        final RdmaTransport clientTransport = RdmaTransport.create(fabric, config());
        final List<Side> sides = new ArrayList<>();
        final List<RdmaChannel> clients = new ArrayList<>();
        final RdmaServer server;

        /** {@code busy} connections with traffic, {@code idle} without (only a device event can fail those fast). */
        Setup(int busy, int idle) throws Exception {
            int connections = busy + idle;
            server = serverTransport.listen(Lab.address(Lab.addr1(), Lab.freshPort()), ch -> {
                Side s = new Side();
                synchronized (sides) {
                    sides.add(s);
                }
                return s;
            });
            for (int i = 0; i < connections; i++) {
                Side s = new Side();
                synchronized (sides) {
                    sides.add(s);
                }
                RdmaChannel c = clientTransport.connect(server.localAddress(), s);
                clients.add(c);
                if (i < busy) {
                    traffic(c);
                }
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (totalFrames() < 100L * busy && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertTrue(totalFrames() >= 100L * busy, "traffic flows before the fault: " + totalFrames());
            while (sideCount() < 2 * connections && System.nanoTime() < deadline + TimeUnit.SECONDS.toNanos(10)) {
                Thread.sleep(10);
            }
            assertEquals(2 * connections, sideCount(), "both ends of every connection");
        }

        int sideCount() {
            synchronized (sides) {
                return sides.size();
            }
        }

        long totalFrames() {
            synchronized (sides) {
                return sides.stream().mapToLong(s -> s.frames.get()).sum();
            }
        }

        /**
         * Waits until every end failed (each with a cause, none a local close); returns the causes and sets
         * {@link #slowestMillis} to the slowest, after {@code startNanos}.
         */
        List<String> awaitAllFailed(long startNanos) throws Exception {
            List<Side> all;
            synchronized (sides) {
                all = new ArrayList<>(sides);
            }
            List<String> causes = new ArrayList<>();
            long slowest = 0;
            for (Side s : all) {
                FabricException cause = s.closed.get(FAIL_BOUND_MILLIS + 5_000, TimeUnit.MILLISECONDS);
                assertNotNull(cause, "a fault is a failure with a cause, not a local close");
                causes.add(cause.getMessage());
                slowest = Math.max(slowest, TimeUnit.NANOSECONDS.toMillis(s.closedAtNanos - startNanos));
            }
            slowestMillis = slowest;
            return causes;
        }

        long slowestMillis;

        /** A fresh connection carries frames (retried while rxe1 comes back). */
        long connectAgain(long boundMillis) throws Exception {
            return FaultsLabTest.connectAgain(clientTransport, serverTransport, server, boundMillis);
        }

        @Override
        public void close() {
            clientTransport.close();
            serverTransport.close();
            fabric.close();
        }
    }

    /** A fresh connection to {@code server} carries a frame (retried while rxe1 comes back). */
    private static long connectAgain(RdmaTransport clientTransport, RdmaTransport serverTransport, RdmaServer server,
                                     long boundMillis) throws Exception {
        long start = System.nanoTime();
        long deadline = start + TimeUnit.MILLISECONDS.toNanos(boundMillis);
        FabricException last = null;
        while (System.nanoTime() < deadline) {
            Side s = new Side();
            try {
                RdmaChannel c = clientTransport.connect(server.localAddress(), s);
                c.write(ByteBuffer.wrap(new byte[] {1, 2, 3}), true);
                long frameDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (serverTransport.channelCount() == 0 && System.nanoTime() < frameDeadline) {
                    Thread.sleep(5);
                }
                c.close();
                return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            } catch (FabricException e) {
                if (last == null || !String.valueOf(last.getMessage()).equals(e.getMessage())) {
                    System.out.println("FaultsLabTest: connecting again after "
                            + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) + " ms: " + e.getMessage()
                            + "; gids " + gids());
                }
                last = e;
                Thread.sleep(200);
            }
        }
        throw new AssertionError("no new connection within " + boundMillis + " ms; last: " + last, last);
    }

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

    @Test
    @Order(2)
    void portDownFailsConnectionsPromptlyAndAfterUpANewConnectionWorks() throws Exception {
        try {
            RdmaResources before = RdmaResources.now();
            try (Setup s = new Setup(2, 2)) {
                long start = System.nanoTime();
                sh("ip", "link", "set", NETDEV, "down");
                List<String> causes = s.awaitAllFailed(start);
                long portErr = causes.stream().filter(c -> c.contains("IBV_EVENT_PORT_ERR")).count();
                System.out.println("FaultsLabTest: ip link set " + NETDEV + " down under traffic: all " + causes.size()
                        + " connection ends failed within " + s.slowestMillis + " ms; " + portErr + " by "
                        + "IBV_EVENT_PORT_ERR, the rest by rxe failing their sends (or their peer's disconnect)");
                // busy ends may fail first by rxe failing their sends; idle ends only by the port event
                assertCauses(causes, "port 1 of RDMA device " + DEVICE + " went down (IBV_EVENT_PORT_ERR)", 2,
                        "IBV_EVENT_PORT_ERR", "IBV_WC_", "disconnected");
                assertTrue(s.slowestMillis < FAIL_BOUND_MILLIS, "failed within " + s.slowestMillis + " ms");
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
                sh("ip", "link", "set", NETDEV, "up");
                restoreAddresses();
                awaitPortActive();
                long activeMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - upStart);
                long reconnectMs;
                try (RdmaTransport serverAgain = RdmaTransport.create(s.fabric, config());
                     RdmaTransport clientAgain = RdmaTransport.create(s.fabric, config())) {
                    RdmaServer server = serverAgain.listen(Lab.address(Lab.addr1(), Lab.freshPort()),
                            ch -> new Side());
                    reconnectMs = connectAgain(clientAgain, serverAgain, server, 30_000);
                }
                System.out.println("FaultsLabTest: ip link set " + NETDEV + " up: port ACTIVE after " + activeMs
                        + " ms, a new connection carried a frame " + reconnectMs + " ms later");
            }
        } finally {
            restoreLab();
        }
    }

    @Test
    @Order(3)
    void deviceDeletedAndReAddedFailsConnectionsAndTheListenerRecoversByItself() throws Exception {
        RdmaResources before = RdmaResources.afterWarmUp(Lab.addr0(), Lab.addr1());
        Process delete = null;
        try {
            try (Setup s = new Setup(2, 1)) {
                long start = System.nanoTime();
                delete = new ProcessBuilder("rdma", "link", "delete", DEVICE).redirectErrorStream(true).start();
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
                sh("rdma", "link", "add", DEVICE, "type", "rxe", "netdev", NETDEV);
                awaitPortActive();
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
            restoreLab();
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
        String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
        List<String> command = List.of("prlimit", "--memlock=65536:65536", "setpriv", "--reuid=65534",
                "--regid=65534", "--clear-groups", java, "-Djava.io.tmpdir=" + dir, "-cp", cp.toString(),
                MemlockProbe.class.getName(), Lab.addr1(), String.valueOf(Lab.freshPort()));
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the probe ended");
        System.out.println("FaultsLabTest: as nobody with memlock 64 KiB: exit " + p.exitValue() + ", "
                + out.lines().filter(l -> l.startsWith("MemlockProbe")).findFirst().orElse(out));
        assertEquals(MemlockProbe.REFUSED, p.exitValue(), out);
        assertTrue(out.contains("RLIMIT_MEMLOCK") && out.contains("ulimit -l") && out.contains("LimitMEMLOCK"), out);
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

    private static String gids() {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < 4; i++) {
            try {
                b.append(Files.readString(Paths.get("/sys/class/infiniband", DEVICE, "ports", "1", "gids",
                        String.valueOf(i))).trim()).append(' ');
            } catch (IOException e) {
                b.append("- ");
            }
        }
        return b.toString();
    }

    /** Port 1 of rxe1 ACTIVE again (bounded). */
    private static void awaitPortActive() throws Exception {
        Path state = Paths.get("/sys/class/infiniband", DEVICE, "ports", "1", "state");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (System.nanoTime() < deadline) {
            if (Files.exists(state) && Files.readString(state).contains("ACTIVE")) {
                return;
            }
            Thread.sleep(50);
        }
        fail(DEVICE + " port 1 not ACTIVE within 20 s: " + (Files.exists(state) ? Files.readString(state) : "absent"));
    }

    /**
     * Leaves the lab as found: v1 up with its addresses (a link taken down loses its IPv6 address), rxe1 present,
     * ACTIVE, with its IPv6 GID, and rdma_cm answering on it. When rdma_cm on rxe1 no longer answers (rxe fails the
     * CM's own MADs while its port is down, which can leave the device's MAD queue pair in error), rxe1 is
     * re-created, and that is printed.
     */
    private static void restoreLab() throws Exception {
        sh("ip", "link", "set", NETDEV, "up");
        restoreAddresses();
        if (!Files.exists(Paths.get("/sys/class/infiniband", DEVICE))) {
            sh("rdma", "link", "add", DEVICE, "type", "rxe", "netdev", NETDEV);
        }
        awaitPortActive();
        awaitGid6();
        String why = cmProbe();
        if (why != null) {
            System.out.println("FaultsLabTest: rdma_cm on " + DEVICE + " does not answer (" + why + "); re-creating "
                    + DEVICE + " to leave the lab as found");
            Process delete = new ProcessBuilder("rdma", "link", "delete", DEVICE).redirectErrorStream(true).start();
            if (!delete.waitFor(3, TimeUnit.SECONDS)) {
                new VerbsFabric().close(); // a rescan lets librdmacm close this process's context of the device
            }
            assertTrue(delete.waitFor(20, TimeUnit.SECONDS), "rdma link delete " + DEVICE + " finished");
            sh("rdma", "link", "add", DEVICE, "type", "rxe", "netdev", NETDEV);
            awaitPortActive();
            awaitGid6();
            String still = cmProbe();
            assertEquals(null, still, "rdma_cm on a re-created " + DEVICE);
        }
    }

    private static void restoreAddresses() throws Exception {
        if (!shOut("ip", "-6", "addr", "show", "dev", NETDEV).contains(Lab.addr6_1() + "/64")) {
            sh("ip", "-6", "addr", "add", Lab.addr6_1() + "/64", "dev", NETDEV, "nodad");
        }
    }

    private static void awaitGid6() throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (System.nanoTime() < deadline) {
            if (gids().contains("fd77:0000:0000:0000:0000:0000:0000:0002")) {
                return;
            }
            Thread.sleep(50);
        }
        fail(DEVICE + " has no GID for " + Lab.addr6_1() + ": " + gids());
    }

    /** Null when a connection over rxe1 is established within 5 s, else why not. */
    private static String cmProbe() {
        ChannelHandler quiet = new Side();
        try (VerbsFabric fabric = new VerbsFabric();
             RdmaTransport t = RdmaTransport.create(fabric, config())) {
            RdmaServer server = t.listen(Lab.address(Lab.addr1(), Lab.freshPort()), ch -> new Side());
            t.connect(server.localAddress(), quiet).close();
            server.close();
            return null;
        } catch (FabricException | RuntimeException e) {
            return e.getMessage();
        }
    }

    private static String shOut(String... command) throws Exception {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        p.waitFor(20, TimeUnit.SECONDS);
        return out;
    }

    private static void sh(String... command) throws Exception {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(20, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IllegalStateException(String.join(" ", command) + " failed: " + out);
        }
    }
}
