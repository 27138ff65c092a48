package dev.artemisrdma.tools;

import dev.artemisrdma.transport.fabric.FabricListener;
import dev.artemisrdma.transport.verbs.VerbsFabric;

import java.net.InetSocketAddress;

/**
 * ib_send_lat / ib_send_bw for the Java stack.
 *
 * <pre>
 * RdmaPerf server --bind ADDR --port PORT
 * RdmaPerf client --connect ADDR --port PORT --mode lat|bw --size BYTES --iters N --layer verbs|transport
 *                [--warmup N] [--settle SECONDS]
 * </pre>
 *
 * The server listens for the verbs layer on PORT and for the transport layer on PORT+1. {@code --layer verbs}
 * measures the bare data path; {@code --layer transport} the whole protocol (framing, credits, completion loop),
 * so the difference is our own overhead. The client's last line of output is the RESULT line. {@code --settle}
 * (transport layer only, ping-pong and stream) goes on warming up after the warm-up's count, in rehearsal windows of
 * {@code --iters} messages, until the JIT is quiet, at most that long: the client prints {@code jit_ms} (compiling
 * inside the measured window) either way, and a transport client {@code settle_s=...} or {@code settle=off}.
 */
public final class RdmaPerf {

    private RdmaPerf() {
    }

    public static void main(String[] args) throws Exception {
        PerfOptions options;
        try {
            options = PerfOptions.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("rdmaperf: " + e.getMessage());
            System.err.println("usage: RdmaPerf server --bind ADDR --port PORT");
            System.err.println("       RdmaPerf client --connect ADDR --port PORT --mode lat|bw --size BYTES "
                    + "--iters N --layer verbs|transport [--warmup N] [--settle SECONDS]");
            System.exit(2);
            return;
        }
        if (options.command().equals("server")) {
            serve(options);
        } else {
            PerfResult result = measure(options);
            System.out.println(String.format(java.util.Locale.ROOT, "rdmaperf: min_us=%.1f", result.minMicros()));
            System.out.println(result.line());
        }
    }

    private static void serve(PerfOptions options) throws Exception {
        VerbsFabric fabric = new VerbsFabric();
        FabricListener verbs = VerbsPerf.listen(fabric, new InetSocketAddress(options.address(), options.port()));
        AutoCloseable transport = TransportPerf.listen(fabric, new InetSocketAddress(options.address(),
                options.port() + 1));
        System.out.println("rdmaperf server: verbs layer on " + verbs.localAddress() + ", transport layer on port "
                + (options.port() + 1) + " (devices " + fabric.deviceNames() + ")");
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                transport.close();
            } catch (Exception ignored) {
                // shutting down
            }
            verbs.close();
            fabric.close();
        }));
        Thread.currentThread().join();
    }

    static PerfResult measure(PerfOptions options) throws Exception {
        try (VerbsFabric fabric = new VerbsFabric()) {
            if (options.layer().equals("verbs")) {
                return VerbsPerf.run(fabric, options);
            }
            return TransportPerf.run(fabric, new PerfOptions(options.command(), options.address(),
                    options.port() + 1, options.mode(), options.size(), options.iters(), options.layer(),
                    options.warmup(), options.settle()));
        }
    }
}
