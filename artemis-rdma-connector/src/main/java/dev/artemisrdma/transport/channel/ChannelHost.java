package dev.artemisrdma.transport.channel;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.flow.BufferPool;
import dev.artemisrdma.transport.flow.ReassemblyBudget;
import dev.artemisrdma.transport.loop.CompletionLoop;
import dev.artemisrdma.transport.loop.LoopChannel;

/**
 * What a channel asks of the transport that made it: the device's send buffers, a place on one of its completion
 * loops, the reassembly budget all channels share, and being forgotten once released. {@code RdmaTransport}
 * implements it; a channel knows the transport only through this.
 */
public interface ChannelHost {

    BufferPool pool(FabricDevice device);

    /** A completion loop on {@code device} with room for {@code entries}; refused with the reason and the key. */
    CompletionLoop.Assignment assignLoop(FabricDevice device, LoopChannel channel, int entries) throws FabricException;

    ReassemblyBudget reassemblyBudget();

    /** The channel is released. */
    void channelClosed(RdmaChannel channel);
}
