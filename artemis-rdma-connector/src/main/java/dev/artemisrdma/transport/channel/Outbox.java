package dev.artemisrdma.transport.channel;

import dev.artemisrdma.transport.flow.PooledBuffer;

/**
 * Frames written but not yet fully posted, in order: a growable ring of buffers (the buffers carry their own
 * progress), so queuing allocates only when the ring grows. The first {@link #flushable()} of them were flushed by
 * their writer and may be posted; the rest wait for the writer's flush (as a Netty write without flush waits), so no
 * other thread's flush (the completion loop's, after credit came back) splits a group the writer is still writing.
 * Not thread-safe: the channel's lock guards it.
 */
final class Outbox {

    private PooledBuffer[] frames = new PooledBuffer[16];
    private int head;
    private int size;
    private int flushable;
    private long queuedBytes;

    void add(PooledBuffer frame) {
        if (size == frames.length) {
            PooledBuffer[] bigger = new PooledBuffer[frames.length * 2];
            for (int i = 0; i < size; i++) {
                bigger[i] = frames[(head + i) % frames.length];
            }
            frames = bigger;
            head = 0;
        }
        int tail = head + size;
        frames[tail < frames.length ? tail : tail - frames.length] = frame;
        size++;
        queuedBytes += frame.frameLength();
    }

    PooledBuffer peek() {
        return size == 0 ? null : frames[head];
    }

    /** The frame {@code i} places behind the head ({@code i < size()}). */
    PooledBuffer get(int i) {
        int at = head + i;
        return frames[at < frames.length ? at : at - frames.length];
    }

    /** Removes the head frame, all of it posted. */
    PooledBuffer remove() {
        PooledBuffer f = frames[head];
        frames[head] = null;
        head = head + 1 == frames.length ? 0 : head + 1;
        size--;
        if (flushable > 0) {
            flushable--;
        }
        return f;
    }

    /** The writer flushed: every frame queued so far may be posted. */
    void markFlushed() {
        flushable = size;
    }

    /** Frames at the head that may be posted (flushed by their writer), at most {@link #size()}. */
    int flushable() {
        return flushable;
    }

    /** Bytes of the queued frames not yet posted. */
    long queuedBytes() {
        return queuedBytes;
    }

    void posted(int bytes) {
        queuedBytes -= bytes;
    }

    boolean isEmpty() {
        return size == 0;
    }

    int size() {
        return size;
    }

    /** Drops every queued frame, releasing its buffer (none of it may be posted still). */
    void releaseAll() {
        while (size > 0) {
            remove().releaseFromChannel();
        }
        flushable = 0;
        queuedBytes = 0;
    }
}
