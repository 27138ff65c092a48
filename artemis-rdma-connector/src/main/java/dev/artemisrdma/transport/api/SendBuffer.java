package dev.artemisrdma.transport.api;

import java.nio.ByteBuffer;

/** A frame being built in registered memory. Write into {@link #buffer()} from position 0. */
public interface SendBuffer {

    /** Direct view over registered memory; its capacity is at least what was asked for. */
    ByteBuffer buffer();

    /** Returns the memory to its pool without sending; idempotent. */
    void release();
}
