package dev.artemisrdma.transport.api;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;

import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.stats.ChannelMeasures;

/**
 * One connection of the transport: an ordered, reliable, message-preserving channel. Each {@link #write} is one
 * frame, delivered whole (fragmented and reassembled underneath when larger than a receive slot) to the peer's
 * {@link ChannelHandler#onFrame}. Writes are thread-safe; handler callbacks come from the channel's completion
 * loop thread. Its statistics are read through {@link ChannelMeasures}, any thread.
 */
public interface RdmaChannel extends AutoCloseable, ChannelMeasures {

    /** A short unique id for logs and for the Artemis connection id. */
    String id();

    InetSocketAddress localAddress();

    InetSocketAddress remoteAddress();

    /**
     * A send buffer of at least {@code capacity} bytes in registered memory, owned by the caller until it is
     * passed to {@link #write(SendBuffer, boolean)} or {@link SendBuffer#release()}d. Encoding straight into it
     * avoids any copy on the send path.
     *
     * @throws IllegalArgumentException when {@code capacity} exceeds this side's maxFrameSize
     * @throws SendMemoryException      when registered memory is refused (maxRegisteredMemory reached); the channel is
     *                                  unharmed and the message names the key
     */
    SendBuffer allocate(int capacity);

    /**
     * Sends bytes {@code [0, buffer.position())} of {@code buffer.buffer()} as one frame and takes ownership of
     * the buffer. With {@code flush == false} the frame may wait for the next flushing write (work requests are
     * posted as one list). Never blocks: when credits or send budget are exhausted the frame is queued and
     * {@link #isWritable()} turns false until the backlog drains. Small frames that queued leave packed, several to
     * a SEND, when the peer reads that; each is still delivered as a frame of its own, in order.
     *
     * @throws FrameTooLargeException when the frame exceeds this side's maxFrameSize or the maximum the peer accepts:
     *                                 refused, nothing sent, the channel unharmed (the buffer is released)
     * @throws FabricException         when the channel is closed or failed (the buffer is released), or when the
     *                                 frame would take the bytes queued unsent past maxQueuedBytesPerConnection (a
     *                                 writer that ignores isWritable toward a peer that takes nothing): then the
     *                                 channel fails with that cause, named in the message
     */
    void write(SendBuffer buffer, boolean flush) throws FabricException;

    /**
     * Copies {@code frame}'s remaining bytes into registered memory and sends them as one frame.
     *
     * @throws FrameTooLargeException as {@link #write(SendBuffer, boolean)}
     * @throws FabricException        when the channel is closed or failed, or no registered memory can be had for the
     *                                copy (the message names maxRegisteredMemory); nothing was sent
     */
    void write(ByteBuffer frame, boolean flush) throws FabricException;

    /** Posts every frame written with {@code flush == false} so far. */
    void flush() throws FabricException;

    /**
     * False while the send backlog is above the high-water mark; {@link ChannelHandler#onWritable} follows. A channel
     * that stays unwritable for unwritableTimeout with no frame leaving fails.
     */
    boolean isWritable();

    /**
     * With {@code false}, delivered frames stop returning receive credit to the peer, so the peer stops
     * sending once its credits run out; nothing is lost. {@code true} resumes.
     */
    void setAutoRead(boolean autoRead);

    boolean isOpen();

    /**
     * Orderly close: pending frames are flushed first, then disconnect, drain and release. Flushing lasts at most
     * {@code closeTimeout} (a peer withholding credits cannot stretch it), and the call returns within
     * closeTimeout + 1 s whatever the peer does; what is left of the teardown finishes on the completion loop.
     */
    @Override
    void close();

    /** Immediate close: pending frames are dropped. Returns within the same bound as {@link #close()}. */
    void forceClose();
}
