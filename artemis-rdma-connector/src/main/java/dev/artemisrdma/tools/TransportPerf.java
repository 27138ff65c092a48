package dev.artemisrdma.tools;

import dev.artemisrdma.transport.Fabric;
import dev.artemisrdma.transport.FabricException;

import java.net.InetSocketAddress;

/** The transport-layer side of {@link RdmaPerf}: the same workloads through framing, credits and the loop. */
final class TransportPerf {

    private TransportPerf() {
    }

    static AutoCloseable listen(Fabric fabric, InetSocketAddress bind) throws FabricException {
        // Wired to RdmaTransport once the transport protocol lands (issue 3).
        return () -> { };
    }

    static PerfResult run(Fabric fabric, PerfOptions options) throws FabricException {
        throw new FabricException("--layer transport needs the transport protocol, which is not in this build yet");
    }
}
