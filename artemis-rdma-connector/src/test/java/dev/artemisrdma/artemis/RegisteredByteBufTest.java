package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntFunction;

import dev.artemisrdma.transport.api.SendBuffer;
import org.junit.jupiter.api.Test;

class RegisteredByteBufTest {

    /** Registered buffers handed out, each with a release count; optionally refusing sizes above a limit. */
    private static final class Pool implements IntFunction<SendBuffer> {
        final List<int[]> releases = new ArrayList<>();
        final List<SendBuffer> handedOut = new ArrayList<>();
        final int limit;

        Pool(int limit) {
            this.limit = limit;
        }

        @Override
        public SendBuffer apply(int capacity) {
            if (capacity > limit) {
                throw new IllegalStateException("no registered buffer of " + capacity + " bytes");
            }
            ByteBuffer memory = ByteBuffer.allocateDirect(capacity);
            int[] count = new int[1];
            releases.add(count);
            SendBuffer buffer = new SendBuffer() {
                @Override
                public ByteBuffer buffer() {
                    return memory;
                }

                @Override
                public void release() {
                    count[0]++;
                }
            };
            handedOut.add(buffer);
            return buffer;
        }

        void assertEachReleasedOnceExceptLast(boolean lastReleased) {
            for (int i = 0; i < releases.size(); i++) {
                boolean last = i == releases.size() - 1;
                assertEquals(last && !lastReleased ? 0 : 1, releases.get(i)[0], "release count of buffer " + i);
            }
        }
    }

    private final Object channel = new Object();

    @Test
    void packetEncodedInRegisteredMemoryIsHandedOverWithoutCopy() {
        Pool pool = new Pool(Integer.MAX_VALUE);
        RegisteredByteBuf buf = RegisteredByteBuf.allocate(pool, channel, 64);
        byte[] tail = new byte[20];
        for (int i = 0; i < tail.length; i++) {
            tail[i] = (byte) (100 + i);
        }
        buf.writeInt(0).writeByte(71).writeLong(12L).writeBytes(tail);
        buf.setInt(0, buf.writerIndex() - 4);
        for (int i = 0; i < tail.length; i++) {
            assertEquals(tail[i], buf.getByte(13 + i), "a byte array written in place, read back through Netty");
        }

        SendBuffer sent = buf.takeSendBuffer();
        assertSame(pool.handedOut.get(0), sent);
        assertEquals(33, sent.buffer().position(), "frame length as the position of the registered buffer");
        assertEquals(29, sent.buffer().getInt(0));
        assertEquals(71, sent.buffer().get(4));
        assertEquals(100, sent.buffer().get(13));
        assertEquals(119, sent.buffer().get(32));
        buf.release();
        assertEquals(0, pool.releases.get(0)[0], "handed-over memory is the transport's to release");
        assertTrue(buf.isOwnedBy(channel));
    }

    @Test
    void growthMovesToLargerRegisteredBufferAndReleasesTheOldOnce() {
        Pool pool = new Pool(Integer.MAX_VALUE);
        RegisteredByteBuf buf = RegisteredByteBuf.allocate(pool, channel, 16);
        byte[] body = new byte[5000];
        for (int i = 0; i < body.length; i++) {
            body[i] = (byte) i;
        }
        buf.writeInt(0).writeBytes(body);
        assertTrue(pool.handedOut.size() >= 2, "grew into another registered buffer");
        pool.assertEachReleasedOnceExceptLast(false);

        SendBuffer sent = buf.takeSendBuffer();
        assertSame(pool.handedOut.get(pool.handedOut.size() - 1), sent);
        assertEquals(5004, sent.buffer().position());
        for (int i = 0; i < body.length; i++) {
            assertEquals(body[i], sent.buffer().get(4 + i), "byte " + i + " survived the move");
        }
        buf.release();
        pool.assertEachReleasedOnceExceptLast(false);
    }

    @Test
    void unsentBufferReleasesItsRegisteredMemoryExactlyOnce() {
        Pool pool = new Pool(Integer.MAX_VALUE);
        RegisteredByteBuf buf = RegisteredByteBuf.allocate(pool, channel, 100);
        buf.writeLong(1);
        buf.retain();
        buf.release();
        assertEquals(0, pool.releases.get(0)[0]);
        buf.release();
        pool.assertEachReleasedOnceExceptLast(true);
    }

    @Test
    void growthBeyondRegisteredMemoryFallsBackToACopy() {
        Pool pool = new Pool(1024);
        RegisteredByteBuf buf = RegisteredByteBuf.allocate(pool, channel, 512);
        byte[] big = new byte[4096];
        for (int i = 0; i < big.length; i++) {
            big[i] = (byte) (i * 7);
        }
        buf.writeBytes(big);
        assertEquals(4096, buf.writerIndex());
        for (int i = 0; i < big.length; i++) {
            assertEquals(big[i], buf.getByte(i), "byte " + i + " in the unregistered storage");
        }
        pool.assertEachReleasedOnceExceptLast(true);
        assertNull(buf.takeSendBuffer(), "unregistered storage: the writer copies");
        buf.release();
        pool.assertEachReleasedOnceExceptLast(true);
    }

    @Test
    void sharedBufferIsNotHandedOver() {
        Pool pool = new Pool(Integer.MAX_VALUE);
        RegisteredByteBuf buf = RegisteredByteBuf.allocate(pool, channel, 32);
        buf.writeInt(4).writeInt(7);
        buf.retain();
        assertNull(buf.takeSendBuffer(), "another holder still reads it");
        buf.release();
        assertNotNull(buf.takeSendBuffer());
        buf.release();
        assertEquals(0, pool.releases.get(0)[0]);
    }
}
