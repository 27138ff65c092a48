package dev.artemisrdma.transport.api;

import java.nio.ByteBuffer;

import dev.artemisrdma.transport.fabric.FabricException;

/** Receives the events of one channel, on its completion-loop thread. */
public interface ChannelHandler {

    /**
     * One whole frame, in {@code frame} from position to limit. The buffer is only valid during the call:
     * copy what must outlive it.
     */
    void onFrame(RdmaChannel channel, ByteBuffer frame);

    /** The completion loop drained a batch of completions; a good moment to flush batched work. */
    default void onEndOfBatch(RdmaChannel channel) {
    }

    /** {@link RdmaChannel#isWritable()} became true again. */
    default void onWritable(RdmaChannel channel) {
    }

    /**
     * The channel is closed and its resources released. {@code cause} is null only after a local
     * {@link RdmaChannel#close()}/{@link RdmaChannel#forceClose()}; a peer that disconnected, a lost peer, a
     * queue pair error or a protocol error give a cause that says what happened (Artemis treats it as failure).
     */
    void onClosed(RdmaChannel channel, FabricException cause);
}
