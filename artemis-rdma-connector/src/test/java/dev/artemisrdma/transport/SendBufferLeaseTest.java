package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.api.SendBuffer;
import dev.artemisrdma.transport.config.TransportConfig;

/** Issue 10 item 8: {@link SendBuffer#release()} is idempotent: a late second release never frees a new owner's buffer. */
class SendBufferLeaseTest {

    private Connection c;

    @BeforeEach
    void connect() throws Exception {
        TransportConfig config = TransportConfig.builder().busyPollMicros(0).build();
        c = new Connection(config, config);
    }

    @AfterEach
    void close() throws Exception {
        c.close();
    }

    @Test
    void aLateSecondReleaseDoesNotFreeTheNextOwnersBuffer() throws Exception {
        SendBuffer first = c.client.allocate(100);
        first.release();
        SendBuffer second = c.client.allocate(100); // the pool hands the same memory out again
        first.release(); // late, duplicate: must be a no-op
        SendBuffer third = c.client.allocate(100);
        assertNotSame(second.buffer(), third.buffer(), "two owners hold the same registered memory");
        second.buffer().putInt(42);
        c.client.write(second, true);
        third.release();
        Peers.await("the frame", 5000, () -> c.serverSide.count() == 1);
        assertEquals(4, c.serverSide.sizes.get(0));
    }

    @Test
    void aReleasedBufferCannotBeWritten() throws Exception {
        SendBuffer b = c.client.allocate(100);
        b.release();
        SendBuffer next = c.client.allocate(100); // same memory, new owner
        assertThrows(IllegalStateException.class, () -> c.client.write(b, true));
        next.buffer().put((byte) 1);
        c.client.write(next, true);
        Peers.await("the frame", 5000, () -> c.serverSide.count() == 1);
        assertEquals(1, c.serverSide.sizes.get(0));
    }
}
