package dev.artemisrdma.tools;

import java.net.InetSocketAddress;

import dev.artemisrdma.transport.fabric.Fabric;
import dev.artemisrdma.transport.fabric.FabricListener;

/**
 * RdmaPerf's two layers, both ends in one JVM over any {@link Fabric} (the host benchmarks run them over the in-memory
 * fabric). In this package because the layers' code is package-private: RdmaPerf's command line is its public face.
 */
public final class InProcessPerf implements AutoCloseable {

    /** One ping-pong's figures: one-way microseconds, as ib_send_lat reports them. */
    public record PingPong(double p50Micros, double p99Micros, double minMicros) {
    }

    private final Fabric fabric;
    private final String address;
    private final int port;
    private final FabricListener verbs;
    private final AutoCloseable transport;

    /** Listens for the verbs layer on {@code port} and for the transport layer on {@code port + 1}. */
    public InProcessPerf(Fabric fabric, String address, int port) throws Exception {
        this.fabric = fabric;
        this.address = address;
        this.port = port;
        this.verbs = VerbsPerf.listen(fabric, new InetSocketAddress(address, port));
        AutoCloseable t;
        try {
            t = TransportPerf.listen(fabric, new InetSocketAddress(address, port + 1));
        } catch (Exception e) {
            verbs.close();
            throw e;
        }
        this.transport = t;
    }

    /** A ping-pong of {@code warmup} + {@code iters} round trips of {@code size} bytes; {@code transport}: ours. */
    public PingPong pingPong(boolean transport, int size, int iters, int warmup) throws Exception {
        PerfOptions options = new PerfOptions("client", address, transport ? port + 1 : port, "lat", size, iters,
                transport ? "transport" : "verbs", warmup, 0);
        PerfResult r = transport ? TransportPerf.run(fabric, options) : VerbsPerf.run(fabric, options);
        return new PingPong(r.p50Micros(), r.p99Micros(), r.minMicros());
    }

    @Override
    public void close() throws Exception {
        try {
            transport.close();
        } finally {
            verbs.close();
        }
    }
}
