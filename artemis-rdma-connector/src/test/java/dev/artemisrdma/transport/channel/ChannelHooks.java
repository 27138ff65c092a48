package dev.artemisrdma.transport.channel;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.loop.FlushRequest;
import dev.artemisrdma.transport.loop.LoopChannel;

/**
 * Opens a channel's package-private state to the tests of other packages (the transport's {@code Connection} helper),
 * so that the channel's public API stays what its users need. Stateless.
 */
public final class ChannelHooks {

    private ChannelHooks() {
    }

    /** Whether {@code channel} is open: established, neither closing nor failed (isOpen() also counts CONNECTING). */
    public static boolean established(RdmaChannel channel) {
        return ((RdmaChannelImpl) channel).state() == ChannelState.OPEN;
    }

    /** The object {@code channel}'s completion loop knows it as (its {@link LoopChannel}). */
    public static LoopChannel loopChannel(RdmaChannel channel) {
        return ((RdmaChannelImpl) channel).loopChannel();
    }

    /** The request {@code channel}'s writers hand its loop when they leave their flush to it. */
    public static FlushRequest flushRequest(RdmaChannel channel) {
        return ((LoopSide) ((RdmaChannelImpl) channel).loopChannel()).flushRequest();
    }
}
