package dev.artemisrdma.transport.channel;

import java.nio.ByteBuffer;
import org.slf4j.Logger;

import dev.artemisrdma.transport.api.FrameTooLargeException;
import dev.artemisrdma.transport.api.SendBuffer;
import dev.artemisrdma.transport.api.SendMemoryException;
import dev.artemisrdma.transport.fabric.Endpoints;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.flow.BufferPool;
import dev.artemisrdma.transport.flow.CreditWindow;
import dev.artemisrdma.transport.flow.PooledBuffer;
import dev.artemisrdma.transport.loop.CompletionLoop;

/**
 * One job: the writers' calls of the channel's API ({@link dev.artemisrdma.transport.api.RdmaChannel}): send buffers
 * allocated, frames taken into the outbox, flushes posted or left to the loop, autoRead, and whether the channel
 * takes writes. A frame goes from the writer's call to a post (or to the loop's hand-off) here and nowhere else.
 *
 * <p>Owner: the writers (Artemis's executors, application threads, a handler on the loop thread), under the channel's
 * lock for every change (the outbox, the send ring, credits returned, writability, posts). A writer's failure (a
 * refused post, the outbox over its cap) does not move the channel: it is recorded, which stops further writes and
 * posts, and the loop fails the channel when it runs the writer's request, asked after the lock is released
 * ({@link ChannelLifecycle#writerFailed}). It keeps no state of its own: the flush it leaves to the loop is the
 * channel's one {@link dev.artemisrdma.transport.loop.FlushRequest}, which {@link LoopSide} holds. {@link #isOpen}
 * and {@link #isWritable} read volatiles, without the lock.
 */
final class WritePath extends ChannelPart {

    private static final Logger LOG = ChannelLog.LOG;

    private final ChannelCommands commands;
    /** The channel as its completion loop knows it: where a writer leaves its flush. */
    private final LoopSide loop;

    WritePath(ChannelPart core, LoopSide loop) {
        super(core);
        this.loop = loop;
        this.commands = loop.commands();
    }

    /** See {@link RdmaChannelImpl#allocate}. */
    SendBuffer allocate(int capacity) {
        if (capacity > config.maxFrameSize()) {
            throw new IllegalArgumentException("channel " + id + ": buffer of " + capacity
                    + " bytes exceeds maxFrameSize " + config.maxFrameSize());
        }
        try {
            return resources.pool().allocate(capacity);
        } catch (FabricException e) {
            throw new SendMemoryException(noSendMemory(capacity, e).getMessage(), e);
        }
    }

    /** Why a send buffer of {@code bytes} could not be had; the pool's reason names the key that raises the bound. */
    private FabricException noSendMemory(int bytes, FabricException why) {
        return new FabricException("channel " + id + " (peer " + Endpoints.describe(remote) + "): no registered memory"
                + " for a " + bytes + "-byte send buffer: " + why.getMessage(), why);
    }

    /** A frame this connection cannot carry: the message says whose maximum it exceeds and where to raise it. */
    private FrameTooLargeException tooLarge(int length, int max) {
        boolean peers = max < config.maxFrameSize();
        return new FrameTooLargeException("channel " + id + " (peer " + Endpoints.describe(remote) + "): frame of "
                + length + " bytes exceeds the maximum frame size " + max + (peers
                ? " that the peer accepts (its handshake); raise maxFrameSize on the peer's side"
                : " of this side; raise maxFrameSize (on both sides)"), length, max);
    }

    void write(SendBuffer buffer, boolean flush) throws FabricException {
        BufferPool pool = resources.pool();
        if (!(buffer instanceof PooledBuffer.Lease lease) || lease.pooled().pool() != pool) {
            writeForeign(buffer, flush);
            return;
        }
        PooledBuffer frame = lease.pooled();
        int length = frame.buffer().position();
        if (!lease.transferToChannel()) {
            throw new IllegalStateException("channel " + id + ": send buffer was already written or released");
        }
        writeOwned(frame, length, flush);
    }

    /** A send buffer that is not our registered memory: copied into some, then released. */
    private void writeForeign(SendBuffer buffer, boolean flush) throws FabricException {
        ByteBuffer b = buffer.buffer().duplicate();
        b.flip();
        try {
            write(b, flush);
        } finally {
            buffer.release();
        }
    }

    /** Queues {@code frame}, the channel's from now on (released by it on every outcome), and flushes if asked. */
    private void writeOwned(PooledBuffer frame, int length, boolean flush) throws FabricException {
        frame.startFrame(length);
        boolean failed = false; // a failure of this writer's, for the loop to apply once the lock is released
        lock.lock();
        try {
            if (!acceptsWrites()) {
                frame.releaseFromChannel();
                throw life.closedException();
            }
            int max = send.maxWritable();
            if (length > max) {
                frame.releaseFromChannel();
                throw tooLarge(length, max);
            }
            FabricException overCap = send.overQueueCap(length);
            if (overCap != null) {
                frame.releaseFromChannel();
                failed = life.writerFailed(overCap); // this connection holds the memory: it fails, not the next one
                throw overCap;
            }
            send.enqueue(frame);
            if (flush) {
                failed = writerFlushLocked();
            }
            if (send.updateWritability()) {
                resources.wakeLoop(); // its tick watches unwritableTimeout from now, even if it was idle
            }
        } finally {
            lock.unlock();
            if (failed) {
                commands.writerFailed();
            }
        }
    }

    void write(ByteBuffer frame, boolean flush) throws FabricException {
        int length = frame.remaining();
        if (length > config.maxFrameSize()) {
            throw tooLarge(length, config.maxFrameSize());
        }
        if (!isOpen()) {
            throw life.closedException();
        }
        PooledBuffer b;
        try {
            b = resources.pool().allocateForChannel(length); // the channel's at once: no lease, nothing allocated
        } catch (FabricException e) {
            throw noSendMemory(length, e);
        }
        b.buffer().put(0, frame, frame.position(), length).position(length); // absolute: no view of the caller's
        writeOwned(b, length, flush);
    }

    void flush() throws FabricException {
        boolean failed = false;
        lock.lock();
        try {
            if (life.state().tearingDown() || life.writerFailure() != null) {
                throw life.closedException();
            }
            failed = writerFlushLocked();
            send.updateWritability();
        } finally {
            lock.unlock();
            if (failed) {
                commands.writerFailed();
            }
        }
    }

    /**
     * A writer's flush: everything it queued may go; posted here, unless the completion loop is handling a batch right
     * now and this is another thread; then the loop posts it after the batch, with whatever else queued on this
     * channel meanwhile, as one list ({@link CompletionLoop#handling}; {@link LoopSide#flushLeftToLoop()}). A loop that
     * is blocked or spinning never delays a write: the writer posts. Returns true when the post failed on this
     * thread: the caller asks the loop to fail the channel once it has released the lock.
     */
    private boolean writerFlushLocked() {
        send.markFlushed();
        CompletionLoop l = resources.loop();
        if (life.state() == ChannelState.OPEN && l != null && l.handling() && !l.isLoopThread()) {
            if (l.takeFlush(loop.flushRequest())) {
                // the loop takes this lock before it posts: after this writer
                send.counts.increment(SendSide.FLUSHES_TO_LOOP);
                return false;
            }
            // the loop ended its batch meanwhile and may not look at the request before its next one: post here
            // (when it does look, it finds nothing left)
        }
        return life.flush(true);
    }

    boolean isWritable() {
        return send.isWritable();
    }

    void setAutoRead(boolean autoRead) {
        boolean failed = false;
        lock.lock();
        try {
            CreditWindow credits = send.credits();
            if (credits.isReturning() == autoRead) {
                return;
            }
            credits.setReturning(autoRead);
            LOG.debug("channel {}: autoRead {}", id, autoRead);
            if (autoRead) {
                failed = life.flush(false); // owed credit goes back now, in a credit frame if no data carries it
            }
        } finally {
            lock.unlock();
            if (failed) {
                commands.writerFailed();
            }
        }
    }

    boolean isOpen() {
        return acceptsWrites();
    }

    /** Neither closing nor closed, and no close asked for (any thread: three volatile reads). */
    private boolean acceptsWrites() {
        return life.acceptsWrites() && !commands.closeAsked();
    }
}
