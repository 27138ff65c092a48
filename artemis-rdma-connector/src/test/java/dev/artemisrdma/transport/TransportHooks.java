package dev.artemisrdma.transport;

import java.time.Duration;
import java.util.List;

import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.loop.CompletionLoop;

/**
 * Opens {@link RdmaTransport}'s package-private test hooks to the tests of the packages beneath it (channel, loop),
 * so that the transport's public API stays what its users need. Stateless.
 */
public final class TransportHooks {

    private TransportHooks() {
    }

    /** The loops in service on {@code device}. */
    public static List<CompletionLoop> loops(RdmaTransport transport, FabricDevice device) {
        return transport.loops(device);
    }

    public static int completionLoops(RdmaTransport transport, FabricDevice device) {
        return transport.completionLoops(device);
    }

    /** A shorter wait for loop threads at close, to see what happens to one that outlives it. */
    public static RdmaTransport loopStopWait(RdmaTransport transport, Duration wait) {
        return transport.loopStopWait(wait);
    }
}
