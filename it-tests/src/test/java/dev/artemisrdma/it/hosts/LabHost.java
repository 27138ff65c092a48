package dev.artemisrdma.it.hosts;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A host of the two-host lab ({@code rdma-lab run --hosts 2}): A, where the tests run, or B, whose processes
 * {@link HostAgent} runs over the management link. Each has its own kernel, one NIC on the wire ({@value #WIRE_NIC},
 * with {@value #RDMA_DEVICE} on it) and one on the management link. A test starts processes on either host
 * ({@link #start}, {@code JavaProcess.Builder.on}), runs commands there ({@link #sh}) and reads its counters
 * ({@link #counters}).
 */
public final class LabHost {

    /** The NIC on the wire between the hosts, on both. */
    public static final String WIRE_NIC = "wire0";
    /** The rxe device on {@link #WIRE_NIC}, on both. */
    public static final String RDMA_DEVICE = "rxe0";
    /** The port {@link HostAgent} listens on (run-lab-tests starts it there). */
    public static final int AGENT_PORT = Integer.getInteger("rdma.lab.agentPort", 7070);

    private static final LabHost A = new LabHost("A", "RDMA_LAB_WIRE_A", "RDMA_LAB_WIRE6_A", "RDMA_LAB_MGMT_A");
    private static final LabHost B = new LabHost("B", "RDMA_LAB_WIRE_B", "RDMA_LAB_WIRE6_B", "RDMA_LAB_MGMT_B");

    private final String name;
    private final String wireEnv;
    private final String wire6Env;
    private final String mgmtEnv;

    private LabHost(String name, String wireEnv, String wire6Env, String mgmtEnv) {
        this.name = name;
        this.wireEnv = wireEnv;
        this.wire6Env = wire6Env;
        this.mgmtEnv = mgmtEnv;
    }

    /** Whether this JVM runs on host A of a two-host lab; a cross-wire test fails (never skips) without it. */
    public static boolean twoHosts() {
        return "2".equals(System.getenv("RDMA_LAB_HOSTS")) && "a".equals(System.getenv("RDMA_LAB_HOST"));
    }

    /** Fails with what to do when this JVM is not on host A of a two-host lab. */
    public static void requireTwoHosts() {
        requireTwoHostLab();
        wireReady();
    }

    private static void requireTwoHostLab() {
        if (!twoHosts()) {
            throw new IllegalStateException("this test runs across the wire of the two-host lab: run it with "
                    + "'it-tests/lab/rdma-lab run --hosts 2 --on-b <agent> -- ...' (run-lab-tests does, for the "
                    + "wire group); RDMA_LAB_HOSTS=" + System.getenv("RDMA_LAB_HOSTS") + ", RDMA_LAB_HOST="
                    + System.getenv("RDMA_LAB_HOST"));
        }
    }

    private static boolean wireChecked;

    /**
     * Once per JVM, before the first cross-wire test: each host resolves the other's IPv4 and IPv6 neighbour over the
     * wire. Once, in CI, the first connection after the two-host boot timed out after 10 s with the
     * listener on A seeing no request at all, while every later one worked; the neighbours, which the passive side's
     * CM needs to answer a REQ, are what a fresh boot lacks. The time it took is printed.
     */
    private static synchronized void wireReady() {
        if (wireChecked) {
            return;
        }
        wireChecked = true; // once, even when it fails: each test then fails on its own
        long t0 = System.nanoTime();
        try {
            A.sh(resolveNeighbours(B.wireAddress(), B.wireAddress6()));
            B.sh(resolveNeighbours(A.wireAddress(), A.wireAddress6()));
        } catch (IOException | InterruptedException | IllegalStateException e) {
            throw new IllegalStateException("the two-host lab's hosts do not resolve each other across the wire: "
                    + e.getMessage(), e);
        }
        System.out.printf("two-host lab: A and B resolved each other across the wire (IPv4 and IPv6) in %d ms%n",
                (System.nanoTime() - t0) / 1_000_000);
    }

    /**
     * A script that makes the kernel resolve {@code addresses} on the wire (a UDP datagram to the discard port needs
     * the neighbour; the lab has no ping) and waits up to 5 s until each is resolved.
     */
    private static String resolveNeighbours(String... addresses) {
        StringBuilder script = new StringBuilder();
        for (String a : addresses) {
            script.append("ok=; for i in $(seq 50); do (echo x > /dev/udp/").append(a).append("/9) 2>/dev/null; ")
                    .append("if ip neigh show ").append(a).append(" dev ").append(WIRE_NIC)
                    .append(" | grep -qE 'REACHABLE|STALE|DELAY|PROBE'; then ok=1; break; fi; sleep 0.1; done; ")
                    .append("[ -n \"$ok\" ] || { echo \"").append(a).append(" unresolved: $(ip neigh show dev ")
                    .append(WIRE_NIC).append(")\"; exit 1; }; ");
        }
        return script.toString();
    }

    public static LabHost a() {
        return A;
    }

    public static LabHost b() {
        return B;
    }

    public String name() {
        return name;
    }

    public boolean isLocal() {
        return this == A;
    }

    /** This host's IPv4 address on the wire (rxe0's). */
    public String wireAddress() {
        return env(wireEnv);
    }

    /** This host's IPv6 address on the wire. */
    public String wireAddress6() {
        return env(wire6Env);
    }

    private static String env(String name) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            requireTwoHostLab();
            throw new IllegalStateException(name + " is not set");
        }
        return v;
    }

    /**
     * Starts {@code command} on this host, stderr merged into stdout, with {@code env} added to the environment
     * (host A: this JVM's; host B: the agent's, which has B's own {@code RDMA_LAB_*}).
     */
    public Process start(List<String> command, Map<String, String> env, String cwd) throws IOException {
        if (isLocal()) {
            ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
            pb.environment().putAll(env);
            if (cwd != null) {
                pb.directory(new java.io.File(cwd));
            }
            return pb.start();
        }
        List<String> kv = new ArrayList<>();
        env.forEach((k, v) -> kv.add(k + "=" + v));
        return RemoteProcess.start(name, new InetSocketAddress(env(mgmtEnv), AGENT_PORT), command, kv, cwd, 120);
    }

    /** What a command printed and how it ended. */
    public record Result(int exitCode, String output) {
    }

    /** Runs {@code script} with bash on this host; fails when it does not end within {@code seconds}. */
    public Result run(String script, long seconds) throws IOException, InterruptedException {
        Process p = start(List.of("bash", "-c", script), Map.of(), null);
        byte[] output;
        try (InputStream in = p.getInputStream()) {
            output = in.readAllBytes();
        }
        if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IllegalStateException("host " + name + ": '" + script + "' did not end within " + seconds + " s");
        }
        return new Result(p.exitValue(), new String(output, StandardCharsets.UTF_8));
    }

    /** Runs {@code script} with bash on this host; fails naming the host and the output when it exits non-zero. */
    public String sh(String script) throws IOException, InterruptedException {
        Result r = run(script, 120);
        if (r.exitCode() != 0) {
            throw new IllegalStateException("host " + name + ": '" + script + "' exited with " + r.exitCode() + ": "
                    + r.output().strip());
        }
        return r.output();
    }

    /**
     * Unplugs ({@code plugged} false) or plugs back the wire's cable at this host's NIC, as a cable pull or a switch
     * port going down would: the NIC loses its carrier (QEMU's {@code set_link}, done by rdma-lab on the machine that
     * runs the guests), rxe's port goes DOWN ({@code IBV_EVENT_PORT_ERR}) and packets are dropped, while the host's
     * addresses and routes stay (unlike {@code ip link set wire0 down}, which removes them, so that rxe can no longer
     * build a packet and fails the queue pair that tries: {@code IBV_WC_LOC_QP_OP_ERR}). Returns once QEMU was told.
     */
    public void cable(boolean plugged) throws IOException, InterruptedException {
        Path dir = Path.of(env("RDMA_LAB_RESULTS"), ".cable");
        String id = name.toLowerCase(Locale.ROOT) + "-" + System.nanoTime();
        Path request = dir.resolve(id + ".req");
        Files.createDirectories(dir);
        Files.writeString(dir.resolve(id + ".tmp"), name.toLowerCase(Locale.ROOT) + " "
                + (plugged ? "on" : "off") + "\n");
        Files.move(dir.resolve(id + ".tmp"), request);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline) {
            if (Files.exists(dir.resolve(id + ".done"))) {
                return;
            }
            if (Files.exists(dir.resolve(id + ".failed"))) {
                throw new IllegalStateException("rdma-lab could not " + (plugged ? "plug" : "unplug") + " the cable of "
                        + this);
            }
            Thread.sleep(10);
        }
        throw new IllegalStateException("rdma-lab did not answer a cable request for " + this + " within 10 s (is "
                + "this the two-host lab?)");
    }

    /** The wire NIC's and the rxe device's counters on this host now. */
    public WireCounters counters() throws IOException, InterruptedException {
        return WireCounters.parse(name, sh(WireCounters.SCRIPT));
    }

    @Override
    public String toString() {
        return "host " + name;
    }
}
