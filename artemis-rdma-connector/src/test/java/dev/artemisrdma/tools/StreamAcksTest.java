package dev.artemisrdma.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;

/** The transport stream's hello and when its server acknowledges: by count, or each frame the client marks. */
class StreamAcksTest {

    @Test
    void aCountedStreamIsAcknowledgedAtItsCountWhateverItsFramesHold() {
        StreamAcks acks = new StreamAcks(new TransportHello(false, 64, 3));
        assertFalse(acks.acknowledges(frame(1, 64), 1), "a 1 in an unsettled stream's frame is the pool's leftover");
        assertFalse(acks.acknowledges(frame(0, 64), 2));
        assertTrue(acks.acknowledges(frame(0, 64), 3));
        assertFalse(acks.acknowledges(frame(1, 64), 4), "past the count");
    }

    @Test
    void aSettledStreamIsAcknowledgedAtEveryMarkedFrame() {
        StreamAcks acks = new StreamAcks(new TransportHello(false, 1, TransportHello.UNTIL_CLOSE));
        assertFalse(acks.acknowledges(frame(0, 1), 1));
        assertTrue(acks.acknowledges(frame(StreamAcks.MARK, 1), 2), "the first window's last frame");
        assertFalse(acks.acknowledges(frame(0, 1), 3));
        assertTrue(acks.acknowledges(frame(StreamAcks.MARK, 1), 4), "and the next window's");
        assertFalse(acks.acknowledges(frame(7, 64), 5), "only the mark marks");
        assertFalse(acks.acknowledges(ByteBuffer.allocate(0), 6), "an empty frame from a peer is not marked");
    }

    @Test
    void theMarkIsReadWhereTheFrameBegins() {
        StreamAcks acks = new StreamAcks(new TransportHello(false, 8, TransportHello.UNTIL_CLOSE));
        ByteBuffer inside = ByteBuffer.allocate(16);
        inside.put(8, StreamAcks.MARK).position(8);
        assertTrue(acks.acknowledges(inside, 1));
        assertEquals(8, inside.position(), "reading the mark consumes nothing");
    }

    @Test
    void theHelloSaysModeSizeAndCount() {
        TransportHello counted = TransportHello.read(new TransportHello(false, 65536, 110_000).encode());
        assertEquals(new TransportHello(false, 65536, 110_000), counted);
        TransportHello settled = TransportHello.read(new TransportHello(false, 64, TransportHello.UNTIL_CLOSE)
                .encode());
        assertEquals(TransportHello.UNTIL_CLOSE, settled.count());
        assertEquals(TransportHello.LENGTH, new TransportHello(true, 64, 12_000).encode().remaining());
        long largest = (long) Integer.MAX_VALUE + Integer.MAX_VALUE; // warm-up and iterations at their largest
        assertEquals(largest, TransportHello.read(new TransportHello(false, 1, largest).encode()).count());
    }

    @Test
    void aHelloThatIsNotOursIsRefused() {
        assertNull(TransportHello.read(ByteBuffer.allocate(TransportHello.LENGTH)), "no magic");
        assertNull(TransportHello.read(ByteBuffer.allocate(TransportHello.LENGTH + 1)
                .putInt(TransportHello.MAGIC).flip()), "too short");
        assertNull(TransportHello.read(hello(2, 64, 10)), "mode 2");
        assertNull(TransportHello.read(hello(1, 0, 10)), "empty frames");
        assertNull(TransportHello.read(hello(1, PerfOptions.MAX_SIZE + 1, 10)), "frames above --size's bound");
        assertNull(TransportHello.read(hello(1, 64, 0)), "nothing to count");
        assertEquals(new TransportHello(true, 64, 10), TransportHello.read(hello(0, 64, 10)));
    }

    private static ByteBuffer hello(int mode, int size, int count) {
        return ByteBuffer.allocate(TransportHello.LENGTH).putInt(TransportHello.MAGIC).put((byte) mode).putInt(size)
                .putInt(count).flip();
    }

    private static ByteBuffer frame(int first, int size) {
        ByteBuffer b = ByteBuffer.allocate(size);
        b.put(0, (byte) first);
        return b;
    }
}
