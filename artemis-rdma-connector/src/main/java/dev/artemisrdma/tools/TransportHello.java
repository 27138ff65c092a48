package dev.artemisrdma.tools;

import java.nio.ByteBuffer;

/**
 * The first frame of a transport-layer RdmaPerf connection: magic, mode (0 lat, 1 bw), frame size, message count.
 * A stream's count is what the server acknowledges after ({@link StreamAcks}); a settled stream does not know its
 * count in advance and announces {@link #UNTIL_CLOSE}: it marks the last frame of each window instead.
 */
record TransportHello(boolean latency, int size, long count) {

    static final int MAGIC = 0x54505246; // "TPRF"
    static final int LENGTH = 13;
    /**
     * The count of a stream whose windows end at marked frames: it runs until the client closes. Never a real count:
     * warm-up and iterations are each at most Integer.MAX_VALUE, so their sum is below it.
     */
    static final long UNTIL_CLOSE = 0xffffffffL;

    ByteBuffer encode() {
        return ByteBuffer.allocate(LENGTH).putInt(MAGIC).put((byte) (latency ? 0 : 1)).putInt(size)
                .putInt((int) count).flip();
    }

    /**
     * The hello in {@code frame}, or null when it is not an RdmaPerf client's: a peer's values are checked, so the
     * server counts and acknowledges only what our own client can announce.
     */
    static TransportHello read(ByteBuffer frame) {
        if (frame.remaining() != LENGTH || frame.getInt() != MAGIC) {
            return null;
        }
        byte mode = frame.get();
        int size = frame.getInt();
        long count = frame.getInt() & 0xffffffffL;
        if (mode != 0 && mode != 1 || size < 1 || size > PerfOptions.MAX_SIZE || count == 0) {
            return null;
        }
        return new TransportHello(mode == 0, size, count);
    }
}
