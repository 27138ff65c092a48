package dev.artemisrdma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.verbs.VerbsFabric;

/**
 * The lab device that fault tests break and mend: rxe1 on netdev v1 (10.77.0.2, fd77::2). Deleting it, adding it
 * back, waiting for its port and GIDs, and {@link #restoreLab()}, which leaves the lab as the tests found it.
 */
public final class RxeDevice {

    public static final String NETDEV = "v1";
    public static final String DEVICE = "rxe1";

    private RxeDevice() {
    }

    /** Starts {@code rdma link delete rxe1}; the kernel finishes it once every process let go of the device. */
    public static Process startDelete() throws IOException {
        return new ProcessBuilder("rdma", "link", "delete", DEVICE).redirectErrorStream(true).start();
    }

    /** {@code rdma link add rxe1 type rxe netdev v1}. */
    public static void add() throws Exception {
        sh("rdma", "link", "add", DEVICE, "type", "rxe", "netdev", NETDEV);
    }

    /** The first four GIDs of rxe1's port 1, for messages. */
    public static String gids() {
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
    public static void awaitPortActive() throws Exception {
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
    public static void restoreLab() throws Exception {
        sh("ip", "link", "set", NETDEV, "up");
        restoreAddresses();
        if (!Files.exists(Paths.get("/sys/class/infiniband", DEVICE))) {
            add();
        }
        awaitPortActive();
        awaitGid6();
        String why = cmProbe();
        if (why != null) {
            System.out.println("RxeDevice: rdma_cm on " + DEVICE + " does not answer (" + why + "); re-creating "
                    + DEVICE + " to leave the lab as found");
            Process delete = startDelete();
            if (!delete.waitFor(3, TimeUnit.SECONDS)) {
                new VerbsFabric().close(); // a rescan lets librdmacm close this process's context of the device
            }
            assertTrue(delete.waitFor(20, TimeUnit.SECONDS), "rdma link delete " + DEVICE + " finished");
            add();
            awaitPortActive();
            awaitGid6();
            String still = cmProbe();
            assertEquals(null, still, "rdma_cm on a re-created " + DEVICE);
        }
    }

    public static void restoreAddresses() throws Exception {
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
        ChannelHandler quiet = new LoadedConnections.End();
        try (VerbsFabric fabric = new VerbsFabric();
             RdmaTransport t = RdmaTransport.create(fabric, LoadedConnections.config())) {
            RdmaServer server = t.listen(Lab.address(Lab.addr1(), Lab.freshPort()), ch -> new LoadedConnections.End());
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

    /** Runs a lab command; throws with its output when it fails or takes over 20 s. */
    public static void sh(String... command) throws Exception {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(20, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IllegalStateException(String.join(" ", command) + " failed: " + out);
        }
    }
}
