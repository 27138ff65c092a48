package dev.artemisrdma.transport.api;

import dev.artemisrdma.transport.fabric.FabricException;

/**
 * A frame was refused because it is larger than this connection can carry: above this side's {@code maxFrameSize},
 * or above the maximum frame size the peer stated in its handshake. Nothing of it was sent and the channel is
 * unharmed; the message names the connection, the peer, both sizes and the key to raise (on which side).
 */
public final class FrameTooLargeException extends FabricException {

    private final int frameLength;
    private final int maxFrameSize;

    public FrameTooLargeException(String message, int frameLength, int maxFrameSize) {
        super(message);
        this.frameLength = frameLength;
        this.maxFrameSize = maxFrameSize;
    }

    /** The length of the refused frame. */
    public int frameLength() {
        return frameLength;
    }

    /** The largest frame this connection carries (the smaller of both sides' maxFrameSize). */
    public int maxFrameSize() {
        return maxFrameSize;
    }
}
