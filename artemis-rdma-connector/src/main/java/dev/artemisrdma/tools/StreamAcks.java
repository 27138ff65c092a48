package dev.artemisrdma.tools;

import java.nio.ByteBuffer;

/**
 * When the transport stream's server writes its one-byte acknowledgement: after the count the hello announced, or,
 * for a settled stream ({@link TransportHello#UNTIL_CLOSE}), after every frame the client marked as the last of a
 * window. Marks are read only in a settled stream: other clients leave the frames' contents as the send pool had
 * them, so a stray 1 there must not end their run.
 */
final class StreamAcks {

    /** The first byte of a frame that ends a settled stream's window; every other frame of such a stream has 0. */
    static final byte MARK = 1;

    private final long expected;

    StreamAcks(TransportHello hello) {
        this.expected = hello.count();
    }

    /** Whether to acknowledge {@code frame}, the {@code received}-th frame of the stream (counting from 1). */
    boolean acknowledges(ByteBuffer frame, long received) {
        if (expected == TransportHello.UNTIL_CLOSE) {
            return frame.hasRemaining() && frame.get(frame.position()) == MARK;
        }
        return received == expected;
    }
}
