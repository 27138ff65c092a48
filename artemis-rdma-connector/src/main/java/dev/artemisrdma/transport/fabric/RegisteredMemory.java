package dev.artemisrdma.transport.fabric;

import java.nio.ByteBuffer;

/**
 * A registered slab. Scatter-gather entries name bytes of it by {@code address() + offset} and {@link #lkey()}.
 * Closing deregisters and frees it: the caller must make sure no posted work request still points into it.
 */
public interface RegisteredMemory extends AutoCloseable {

    /** A view of the whole slab (direct, position 0, limit = length); callers duplicate or slice it. */
    ByteBuffer buffer();

    long address();

    int lkey();

    int length();

    @Override
    void close();
}
