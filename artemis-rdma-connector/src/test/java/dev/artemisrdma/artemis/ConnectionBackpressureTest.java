package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import dev.artemisrdma.transport.config.TransportConfig;
import org.apache.activemq.artemis.api.core.ActiveMQBuffer;
import org.apache.activemq.artemis.api.core.ActiveMQException;
import org.apache.activemq.artemis.core.server.ActiveMQComponent;
import org.apache.activemq.artemis.spi.core.remoting.BaseConnectionLifeCycleListener;
import org.apache.activemq.artemis.spi.core.remoting.BufferHandler;
import org.apache.activemq.artemis.spi.core.remoting.Connection;
import org.junit.jupiter.api.AfterEach;
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
        try (RdmaRuntime.Lease lease = RdmaRuntime.acquire(TransportConfig.fromMap(settings));
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

    /** A client connection to {@link #ADDRESS} on the shared runtime, the accepted end handed to {@code server}. */
    private static RdmaConnection connect(RdmaRuntime.Lease lease, Recorder serverSide, Executor executor,
                                          AtomicReference<RdmaConnection> server, BufferHandler clientSide)
            throws Exception {
        CountDownLatch accepted = new CountDownLatch(1);
        AutoCloseable listening = lease.transport().listen(ADDRESS, ch -> {
            RdmaConnection c = new RdmaConnection(PARAMS, serverSide, new Events(), executor, 0, true).bind(ch);
            server.set(c);
            accepted.countDown();
            return c;
        });
        LISTENERS.add(listening);
        RdmaConnection client = new RdmaConnection(PARAMS, clientSide, new Events(), executor, 0, false);
        client.bind(lease.transport().connect(ADDRESS, client));
        assertTrue(accepted.await(5, TimeUnit.SECONDS));
        return client;
    }

    private static final List<AutoCloseable> LISTENERS = new CopyOnWriteArrayList<>();

    @AfterEach
    void closeListeners() throws Exception {
        for (AutoCloseable listening : LISTENERS) {
            listening.close();
        }
        LISTENERS.clear();
    }

    @Test
    void blockUntilWritableOnTheCompletionLoopAnswersAtOnce() throws Exception {
        TestRuntime.install();
        Map<String, Object> settings = Map.of("writeHighWaterMark", "16k");
        AtomicReference<RdmaConnection> server = new AtomicReference<>();
        AtomicReference<RdmaConnection> clientRef = new AtomicReference<>();
        CountDownLatch answered = new CountDownLatch(1);
        AtomicReference<String> answer = new AtomicReference<>();
        BufferHandler clientSide = (id, buffer) -> { // runs on the completion loop
            long start = System.nanoTime();
            boolean writable = clientRef.get().blockUntilWritable(5, TimeUnit.SECONDS);
            answer.set(writable + " after " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) + " ms");
            answered.countDown();
        };
        try (RdmaRuntime.Lease lease = RdmaRuntime.acquire(TransportConfig.fromMap(settings))) {
            RdmaConnection client = connect(lease, new Recorder(), Runnable::run, server, clientSide);
            clientRef.set(client);
            server.get().setAutoRead(false);
            long sent = 0;
            while (client.blockUntilWritable(0, TimeUnit.MILLISECONDS) && sent < 5000) {
                send(client, sent++);
            }
            assertFalse(client.blockUntilWritable(0, TimeUnit.MILLISECONDS), "never pushed back");
            send(server.get(), 0); // the client's handler asks on the loop thread, which alone can unblock it
            assertTrue(answered.await(10, TimeUnit.SECONDS), "blockUntilWritable hung the completion loop");
            assertTrue(answer.get().startsWith("false after "), answer.get());
            assertTrue(Long.parseLong(answer.get().replaceAll("\\D", "")) < 1000, answer.get());
            server.get().setAutoRead(true);
            assertTrue(client.blockUntilWritable(10, TimeUnit.SECONDS), "writable again once the peer reads");
            client.close();
        }
    }

    @Test
    void isWritableEitherAnswersTrueOrCallsItsListenerExactlyOnceLater() throws Exception {
        TestRuntime.install();
        ExecutorService pool = Executors.newCachedThreadPool();
        AtomicReference<RdmaConnection> server = new AtomicReference<>();
        try (RdmaRuntime.Lease lease = RdmaRuntime.acquire(
                TransportConfig.fromMap(Map.of("writeHighWaterMark", "16k")))) {
            RdmaConnection client = connect(lease, new Recorder(), pool, server, new Recorder());
            ThreadLocal<Boolean> inside = ThreadLocal.withInitial(() -> false);
            List<String> violations = new CopyOnWriteArrayList<>();
            int registered = 0;
            AtomicInteger calls = new AtomicInteger();
            for (long i = 0; i < 20_000; i++) {
                send(client, i);
                inside.set(true);
                boolean writable;
                try {
                    writable = client.isWritable(() -> {
                        if (inside.get()) {
                            violations.add("called inside isWritable");
                        }
                        calls.incrementAndGet();
                    });
                } finally {
                    inside.set(false);
                }
                if (!writable) {
                    registered++;
                    assertTrue(client.blockUntilWritable(10, TimeUnit.SECONDS), "stuck unwritable");
                }
            }
            int expected = registered;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (calls.get() < expected && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertTrue(registered > 0, "never pushed back: nothing was tested");
            Thread.sleep(100);
            assertEquals(expected, calls.get(), "each registration is answered exactly once");
            assertEquals(List.of(), violations);
            client.close();
        } finally {
            pool.shutdownNow();
        }
    }

    /** A channel whose writability answers follow a script (then stay at the last answer); nothing is sent. */
    private static final class ScriptedChannel implements dev.artemisrdma.transport.api.RdmaChannel {
        final Queue<Boolean> answers;
        volatile boolean last;

        ScriptedChannel(Boolean... answers) {
            this.answers = new ConcurrentLinkedQueue<>(List.of(answers));
        }

        @Override
        public boolean isWritable() {
            Boolean next = answers.poll();
            if (next != null) {
                last = next;
            }
            return last;
        }

        @Override
        public String id() {
            return "scripted";
        }

        @Override
        public InetSocketAddress localAddress() {
            return ADDRESS;
        }

        @Override
        public InetSocketAddress remoteAddress() {
            return ADDRESS;
        }

        @Override
        public dev.artemisrdma.transport.api.SendBuffer allocate(int capacity) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void write(dev.artemisrdma.transport.api.SendBuffer buffer, boolean flush) {
        }

        @Override
        public void write(java.nio.ByteBuffer frame, boolean flush) {
        }

        @Override
        public void flush() {
        }

        @Override
        public void setAutoRead(boolean autoRead) {
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() {
        }

        @Override
        public void forceClose() {
        }

        @Override
        public dev.artemisrdma.transport.stats.TransportStats stats() {
            throw new UnsupportedOperationException();
        }

        @Override
        public dev.artemisrdma.transport.stats.ChannelCounters counters() {
            throw new UnsupportedOperationException();
        }

        @Override
        public long registeredBytes() {
            return 0;
        }

        @Override
        public boolean olderPeer() {
            return false;
        }

        @Override
        public SharedPool sharedPool() {
            return null;
        }
    }

    @Test
    void channelTurningWritableWhileTheListenerRegistersAnswersTrueAndNeverCallsIt() throws Exception {
        // not writable at the first look, writable at the second: the notification came and went in between
        ScriptedChannel channel = new ScriptedChannel(false, true);
        RdmaConnection connection = new RdmaConnection(PARAMS, new Recorder(), new Events(), Runnable::run, 0, false)
                .bind(channel);
        AtomicInteger calls = new AtomicInteger();
        assertTrue(connection.isWritable(calls::incrementAndGet), "writable at the second look");
        connection.fireReady(true);
        Thread.sleep(100);
        assertEquals(0, calls.get(), "a listener answered with true must not be called");
    }

    @Test
    void listenerRegisteredWhileUnwritableIsCalledOnceByTheNotificationNotInline() throws Exception {
        ScriptedChannel channel = new ScriptedChannel(false, false);
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try {
            RdmaConnection connection = new RdmaConnection(PARAMS, new Recorder(), new Events(), pool, 0, false)
                    .bind(channel);
            AtomicInteger calls = new AtomicInteger();
            org.apache.activemq.artemis.spi.core.remoting.ReadyListener listener = calls::incrementAndGet;
            assertFalse(connection.isWritable(listener));
            assertFalse(connection.isWritable(listener), "registering twice is one registration");
            assertEquals(0, calls.get(), "called inline");
            channel.answers.add(true);
            connection.onWritable(channel);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (calls.get() == 0 && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertEquals(1, calls.get());
        } finally {
            pool.shutdownNow();
        }
    }
}
