package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.activemq.artemis.api.core.ActiveMQBuffer;
import org.apache.activemq.artemis.api.core.ActiveMQException;
import org.apache.activemq.artemis.core.server.ActiveMQComponent;
import org.apache.activemq.artemis.spi.core.remoting.BaseConnectionLifeCycleListener;
import org.apache.activemq.artemis.spi.core.remoting.BufferHandler;
import org.apache.activemq.artemis.spi.core.remoting.Connection;
import org.junit.jupiter.api.Test;

/** One connection pair on the shared runtime: framing seen by Artemis, back-pressure, autoRead, close reporting. */
class ConnectionBackpressureTest {

    private static final InetSocketAddress ADDRESS = new InetSocketAddress("127.0.0.1", 61741);
    private static final Map<String, Object> PARAMS = Map.of("host", "127.0.0.1", "port", 61741);
    private static final int BODY = 4096;

    /** Records delivered packets: sequence numbers, and whether each had the shape Artemis decoders require. */
    private static final class Recorder implements BufferHandler {
        final List<Long> sequences = new CopyOnWriteArrayList<>();
        final List<String> badShapes = new CopyOnWriteArrayList<>();

        @Override
        public void bufferReceived(Object connectionID, ActiveMQBuffer buffer) {
            int expected = 4 + 1 + 8 + BODY;
            if (buffer.readerIndex() != 4 || buffer.capacity() != expected || buffer.writerIndex() != expected
                    || buffer.getInt(0) != expected - 4) {
                badShapes.add("readerIndex=" + buffer.readerIndex() + " capacity=" + buffer.capacity());
            }
            buffer.readByte();
            sequences.add(buffer.readLong());
        }
    }

    private static final class Events implements BaseConnectionLifeCycleListener<Object> {
        final CountDownLatch destroyed = new CountDownLatch(1);
        final AtomicReference<Boolean> failed = new AtomicReference<>();

        @Override
        public void connectionCreated(ActiveMQComponent component, Connection connection, Object protocol) {
        }

        @Override
        public void connectionDestroyed(Object connectionID, boolean failed) {
            this.failed.set(failed);
            destroyed.countDown();
        }

        @Override
        public void connectionException(Object connectionID, ActiveMQException me) {
        }

        @Override
        public void connectionReadyForWrites(Object connectionID, boolean ready) {
        }
    }

    private static void send(RdmaConnection connection, long seq) {
        ActiveMQBuffer buffer = connection.createTransportBuffer(64); // grows past its initial size
        buffer.writeInt(0);
        buffer.writeByte((byte) 71);
        buffer.writeLong(seq);
        buffer.writeBytes(new byte[BODY]);
        buffer.setInt(0, buffer.writerIndex() - 4);
        connection.write(buffer, false, true);
    }

    @Test
    void autoReadOffHoldsTheSenderBackAndLosesNothing() throws Exception {
        TestRuntime.install();
        Recorder serverSide = new Recorder();
        Events serverEvents = new Events();
        Events clientEvents = new Events();
        AtomicReference<RdmaConnection> server = new AtomicReference<>();
        CountDownLatch accepted = new CountDownLatch(1);
        Map<String, Object> settings = Map.of("writeHighWaterMark", "64k");
        try (RdmaRuntime.Lease lease = RdmaRuntime.acquire(settings);
             AutoCloseable listening = lease.transport().listen(ADDRESS, ch -> {
                 RdmaConnection c = new RdmaConnection(PARAMS, serverSide, serverEvents, Runnable::run, 0, true)
                         .bind(ch);
                 c.setAutoRead(false);
                 server.set(c);
                 accepted.countDown();
                 return c;
             })) {
            RdmaConnection client = new RdmaConnection(PARAMS, new Recorder(), clientEvents, Runnable::run, 0, false);
            client.bind(lease.transport().connect(ADDRESS, client));
            assertTrue(accepted.await(5, TimeUnit.SECONDS));

            CountDownLatch ready = new CountDownLatch(1);
            long sent = 0;
            while (sent < 5000 && client.isWritable(ready::countDown)) {
                send(client, sent++);
            }
            assertTrue(sent < 5000, "the sender never saw back-pressure while the receiver did not read");
            assertFalse(client.isWritable(ready::countDown));
            Thread.sleep(100);
            assertEquals(1, ready.getCount(), "ready fired while still blocked");

            server.get().setAutoRead(true);
            assertTrue(ready.await(10, TimeUnit.SECONDS), "ReadyListener not called after reading resumed");
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (serverSide.sequences.size() < sent && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertEquals(sent, serverSide.sequences.size(), "frames lost");
            for (int i = 0; i < sent; i++) {
                assertEquals(i, serverSide.sequences.get(i), "frame order");
            }
            assertEquals(List.of(), serverSide.badShapes);

            client.close();
            assertTrue(serverEvents.destroyed.await(5, TimeUnit.SECONDS), "server not told of the client close");
            assertNotNull(serverEvents.failed.get());
            assertTrue(serverEvents.failed.get(), "a vanished peer is reported as a failure");
            assertEquals(Boolean.FALSE, clientEvents.failed.get(), "a local close is reported as a close");
        }
    }
}
