package dev.artemisrdma.artemis;

import java.lang.invoke.MethodHandles;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.api.SendBuffer;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.LogLimiter;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.EventLoop;
import io.netty.util.ReferenceCountUtil;
import org.apache.activemq.artemis.api.core.ActiveMQBuffer;
import org.apache.activemq.artemis.api.core.ActiveMQException;
import org.apache.activemq.artemis.api.core.ActiveMQInternalErrorException;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.buffers.impl.ChannelBufferWrapper;
import org.apache.activemq.artemis.core.security.ActiveMQPrincipal;
import org.apache.activemq.artemis.spi.core.protocol.RemotingConnection;
import org.apache.activemq.artemis.spi.core.remoting.BaseConnectionLifeCycleListener;
import org.apache.activemq.artemis.spi.core.remoting.BufferHandler;
import org.apache.activemq.artemis.spi.core.remoting.Connection;
import org.apache.activemq.artemis.spi.core.remoting.ReadyListener;
import org.apache.activemq.artemis.utils.SocketAddressUtil;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

/**
 * An Artemis {@link Connection} over one {@link RdmaChannel}, on either side. Each {@code write} is one Core packet
 * sent as one transport frame, straight from registered memory when the packet was encoded into a buffer of
 * {@link #createTransportBuffer}; each received frame is handed to Artemis as one packet ({@code capacity == 4 +
 * length}, {@code readerIndex == 4}). Carries CORE only: no protocol handling, no event loop.
 *
 * <p>Threads: Artemis's threads write and close; the channel's completion loop delivers frames and writability and
 * reports the end; the channel, the protocol connection and the loop thread are published through volatile fields,
 * close runs once ({@code closed}), and writers waiting for writability wait on {@code writableSignal}.
 */
final class RdmaConnection implements Connection, ChannelHandler {

    private static final Logger logger = LoggerFactory.getLogger(MethodHandles.lookup().lookupClass());
    // what a peer can make us log at will: LogLimiter.LINES lines per site and interval, then a summary
    private static final LogLimiter PACKET_FAILED = LogLimiter.site(logger, Level.WARN, "received packets that failed");
    private static final LogLimiter BAD_FRAME = LogLimiter.site(logger, Level.ERROR, "malformed Core frames");
    private static final LogLimiter REFUSED_PACKET = LogLimiter.site(logger, Level.ERROR,
            "connections closed on a refused packet");
    private static final int LENGTH_FIELD = 4;
    /**
     * Core packets sent straight from registered memory, and packets that had to be copied into it first (encoded
     * into a buffer not of {@link #createTransportBuffer}): JVM-wide, the proof that Core writes are zero-copy.
     */
    static final LongAdder ZERO_COPY_PACKETS = new LongAdder();
    static final LongAdder COPIED_PACKETS = new LongAdder();
    /** Longest single wait for writability; a close is not signalled, so waits are bounded and repeated. */
    private static final long RESUME_WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(10);
    private static final String REPLICATION_MANAGER = "org.apache.activemq.artemis.core.replication.ReplicationManager";

    private final Map<String, Object> endpointParams;
    private final BufferHandler handler;
    private final BaseConnectionLifeCycleListener<?> listener;
    private final Executor listenerExecutor;
    private final boolean batching;
    private final boolean directDeliver;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final List<ReadyListener> readyListeners = new ArrayList<>();
    private final Object writableSignal = new Object();
    /** The channel's completion loop thread, learned from its callbacks (they all come from it). */
    private volatile Thread loopThread;
    private volatile RdmaChannel channel;
    /** {@code channel::allocate}, made once at bind: a method reference made per packet is an object per packet. */
    private volatile java.util.function.IntFunction<SendBuffer> allocator;
    private volatile RemotingConnection protocolConnection;
    /** Failed by the peer or the fabric, not closed locally: its connector's client will try to reconnect. */
    private volatile boolean lost;

    /**
     * @param endpointParams   what {@link #getConnectorConfig()} describes the connection with: a client's connector
     *                         configuration, whole (Artemis makes a factory's later connections from the first one's
     *                         description), or what a client needs to reach an acceptor
     *                         ({@link RdmaParameters#connectorParams})
     * @param listenerExecutor where a lost peer is reported and ready listeners are called, off the transport's
     *                         completion thread
     * @param batchDelay       &gt; 0: batched writes wait for {@link #checkFlushBatchBuffer} (scheduled by the owner)
     */
    RdmaConnection(Map<String, ?> endpointParams, BufferHandler handler, BaseConnectionLifeCycleListener<?> listener,
                   Executor listenerExecutor, int batchDelay, boolean directDeliver) {
        this.endpointParams = new LinkedHashMap<>(endpointParams);
        this.handler = handler;
        this.listener = listener;
        this.listenerExecutor = listenerExecutor;
        this.batching = batchDelay > 0;
        this.directDeliver = directDeliver;
    }

    /** Attaches the channel; called once, before any frame is delivered for it. */
    RdmaConnection bind(RdmaChannel channel) {
        this.allocator = channel::allocate;
        this.channel = channel;
        return this;
    }

    RdmaChannel channel() {
        return channel;
    }

    // ---- receive side (ChannelHandler, on the transport's completion thread) ----

    @Override
    public void onFrame(RdmaChannel ch, ByteBuffer frame) {
        loopThread = Thread.currentThread();
        int size = frame.remaining();
        ByteBuf packet = Unpooled.wrappedBuffer(frame); // no copy: capacity == size, index 0 == length field
        try {
            if (size < LENGTH_FIELD || packet.getInt(0) != size - LENGTH_FIELD) {
                failOnBadFrame(ch, size, packet);
                return;
            }
            packet.readerIndex(LENGTH_FIELD);
            handler.bufferReceived(ch.id(), new ChannelBufferWrapper(packet));
        } catch (RuntimeException e) {
            if (PACKET_FAILED.admit()) {
                logger.warn("RDMA connection {} to {}: handling a received packet failed", ch.id(),
                        ch.remoteAddress(), e);
            }
            ActiveMQException failure = new ActiveMQInternalErrorException(e.getMessage(), e);
            listener.connectionException(ch.id(), failure);
        } finally {
            packet.release();
        }
    }

    private void failOnBadFrame(RdmaChannel ch, int size, ByteBuf packet) {
        String lengthField = size < LENGTH_FIELD ? "none" : Integer.toString(packet.getInt(0));
        if (BAD_FRAME.admit()) {
            logger.error("RDMA connection {} to {}: received a {}-byte frame whose Core length field is {}, "
                    + "expected {}; closing the connection", ch.id(), ch.remoteAddress(), size, lengthField,
                    size - LENGTH_FIELD);
        }
        ch.forceClose();
        reportLost(ch, new FabricException("malformed Core frame from " + ch.remoteAddress()));
    }

    @Override
    public void onEndOfBatch(RdmaChannel ch) {
        handler.endOfBatch(ch.id());
    }

    @Override
    public void onWritable(RdmaChannel ch) {
        loopThread = Thread.currentThread();
        synchronized (writableSignal) {
            writableSignal.notifyAll();
        }
        fireReady(true);
        listener.connectionReadyForWrites(ch.id(), true);
    }

    @Override
    public void onClosed(RdmaChannel ch, FabricException cause) {
        if (cause == null && closed.get()) {
            logger.debug("RDMA connection {} to {} closed", ch.id(), ch.remoteAddress());
            return;
        }
        reportLost(ch, cause);
    }

    /** Reports the connection as failed, once, unless it was closed locally first. */
    private void reportLost(RdmaChannel ch, FabricException cause) {
        if (closed.compareAndSet(false, true)) {
            lost = true;
            logger.debug("RDMA connection {} to {} lost: {}", ch.id(), ch.remoteAddress(),
                    cause == null ? "closed by the transport" : cause.getMessage());
            Object id = ch.id();
            listenerExecutor.execute(() -> listener.connectionDestroyed(id, true));
        }
    }

    /** True when the connection failed (peer gone, fabric error) rather than being closed by this side. */
    boolean wasLost() {
        return lost;
    }

    // ---- send side ----

    @Override
    public ActiveMQBuffer createTransportBuffer(int size) {
        RdmaChannel ch = channel;
        return new ChannelBufferWrapper(RegisteredByteBuf.allocate(allocator, ch, size), true);
    }

    @Override
    public void write(ActiveMQBuffer buffer, boolean flush, boolean batched) {
        send(buffer, flush || !batched || !batching);
    }

    @Override
    public void write(ActiveMQBuffer buffer, boolean flush, boolean batched, ChannelFutureListener futureListener) {
        if (futureListener != null) {
            ReferenceCountUtil.release(buffer.byteBuf());
            throw new UnsupportedOperationException("RDMA connection " + getID()
                    + ": writes with a Netty ChannelFutureListener are not supported (CORE only)");
        }
        write(buffer, flush, batched);
    }

    @Override
    public void write(ActiveMQBuffer buffer, boolean requestFlush) {
        send(buffer, requestFlush);
    }

    @Override
    public void write(ActiveMQBuffer buffer) {
        send(buffer, true);
    }

    /**
     * Sends one whole packet and releases its buffer (the transport owns it from here, as with Netty). Never throws
     * into the calling broker thread: a packet the open channel refuses (larger than the peer accepts, no registered
     * memory for it) fails this connection with the reason, because a Core stream with a packet missing is corrupt.
     */
    private void send(ActiveMQBuffer buffer, boolean post) {
        ByteBuf bytes = buffer.byteBuf();
        RdmaChannel ch = channel;
        try {
            if (closed.get() && ch.isOpen()) {
                return; // failed by a refused packet: nothing after the gap may go out
            }
            SendBuffer registered = bytes instanceof RegisteredByteBuf rb && rb.isOwnedBy(ch)
                    ? rb.takeSendBuffer() : null;
            if (registered != null) {
                ch.write(registered, post);
                ZERO_COPY_PACKETS.increment();
            } else {
                ch.write(bytes.nioBuffer(bytes.readerIndex(), bytes.readableBytes()), post);
                COPIED_PACKETS.increment();
            }
        } catch (FabricException e) {
            if (ch.isOpen()) {
                failOnRefusedPacket(ch, e.getMessage(), e);
            } else { // closed or failed: onClosed reports the loss; nothing can be sent any more
                logger.debug("RDMA connection {} to {}: packet not sent, channel closed: {}", ch.id(),
                        ch.remoteAddress(), e.getMessage());
            }
        } catch (RuntimeException e) {
            failOnRefusedPacket(ch, "packet of " + bytes.readableBytes() + " bytes not sent: " + e, e);
        } finally {
            ReferenceCountUtil.release(bytes);
        }
    }

    /**
     * The open channel refused a packet: the connection fails with {@code reason} (logged, and given to Artemis as
     * the connection's exception, so a client's failover or the broker's log says why). The channel closes off the
     * calling thread; later writes are dropped until it has.
     */
    private void failOnRefusedPacket(RdmaChannel ch, String reason, Exception e) {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        if (REFUSED_PACKET.admit()) {
            // our own refusals (FabricException) say all in their reason; anything else needs its stack trace
            logger.error("RDMA connection {} to {}: {}; closing the connection", ch.id(), ch.remoteAddress(), reason,
                    e instanceof FabricException ? null : e);
        }
        Object id = ch.id();
        ActiveMQException failure = new ActiveMQInternalErrorException("RDMA connection " + id + " to "
                + ch.remoteAddress() + ": " + reason, e);
        listenerExecutor.execute(() -> {
            ch.forceClose();
            listener.connectionException(id, failure);
            listener.connectionDestroyed(id, true);
        });
    }

    @Override
    public void flush() {
        try {
            channel.flush();
        } catch (FabricException e) {
            throw new IllegalStateException("RDMA connection " + getID() + " to " + getRemoteAddress()
                    + ": flush failed: " + e.getMessage(), e);
        }
    }

    @Override
    public void checkFlushBatchBuffer() {
        if (batching && !closed.get()) {
            try {
                channel.flush();
            } catch (FabricException e) {
                logger.debug("RDMA connection {}: batch flush failed: {}", getID(), e.getMessage());
            }
        }
    }

    // ---- back-pressure ----
    //
    // The contract for isWritable(listener): it answers true, or it registers the listener and answers false, and
    // then the listener is called once, later, off the completion loop (which must keep polling), after the channel
    // turned writable again. It never calls the listener itself: the check and the registration happen under the
    // lock the writability notification takes to collect the listeners, so no notification falls in between.
    //
    // One caller cannot live with a callback from another thread: Artemis's ReplicationManager drives the primary's
    // end of a replication connection from its own ordered executor ("while (blockUntilWritable(0)) send", then
    // "if (!isWritable(onResume)) awaitingResume = true") with plain, non-volatile flags and a single-consumer
    // queue, and assumes onResume runs on that executor, as Netty's event loop guarantees. Called from here it runs
    // beside a flusher that the next replicated packet starts on the executor, and the two lose the resume between
    // them: replication stalls until the initial sync times out (seen on FakeFabric with a 64 KiB high-water mark).
    // So that listener is never registered: isWritable waits in place (on a signal, bounded) and answers true, and
    // the manager re-submits its flusher to its own executor, which sends again once the channel drained.
    //
    // Why by name, and not by a rule for every listener: no thread of ours can run this listener safely. Its resume
    // runs the manager's flusher inline (a single-consumer queue, guarded by plain flags) and Artemis asserts it runs
    // on the replication executor (checkEventLoop), which Artemis picks itself (Netty's event loop for a
    // NettyConnection, its own ordered executor otherwise) and which the SPI does not expose. Calling every listener
    // on an ordered executor per connection, with this check removed, was tried on FakeFabric: the initial sync of
    // ReplicationOverRdmaTest stalled ("the backup never finished its initial sync"). Every other listener Artemis
    // registers (ServerConsumerImpl, BridgeImpl) only schedules work on its own executor, so any thread suits it, and
    // waiting in place for those would hold a queue's delivery behind one slow consumer.
    //
    // blockUntilWritable waits on the same signal, never spins, and never waits on the completion loop thread: that
    // thread is the only one that can make the channel writable, so there it just answers.

    @Override
    public boolean isWritable(ReadyListener readyListener) {
        if (channel.isWritable()) {
            return true;
        }
        if (needsItsOwnThread(readyListener)) {
            awaitWritable(RESUME_WAIT_NANOS);
            return true;
        }
        synchronized (readyListeners) {
            if (channel.isWritable()) {
                return true;
            }
            if (!readyListeners.contains(readyListener)) {
                readyListeners.add(readyListener);
            }
            return false;
        }
    }

    /** Listeners of Artemis's replication, which must run on the replication executor (see above). */
    static boolean needsItsOwnThread(ReadyListener readyListener) {
        return readyListener.getClass().getName().startsWith(REPLICATION_MANAGER);
    }

    /** Calls the registered ready listeners, off the calling thread; {@code false} is ignored, as by Netty. */
    @Override
    public void fireReady(boolean ready) {
        if (!ready) {
            return;
        }
        List<ReadyListener> toCall;
        synchronized (readyListeners) {
            if (readyListeners.isEmpty()) {
                return;
            }
            toCall = new ArrayList<>(readyListeners);
            readyListeners.clear();
        }
        listenerExecutor.execute(() -> {
            for (ReadyListener readyListener : toCall) {
                try {
                    readyListener.readyForWriting();
                } catch (Throwable t) {
                    logger.warn("RDMA connection {}: a ready listener failed", getID(), t);
                }
            }
        });
    }

    /** Waits until the channel is writable, closed, or {@code nanos} passed; the caller looks again. */
    private void awaitWritable(long nanos) {
        if (Thread.currentThread() == loopThread) {
            return;
        }
        try {
            synchronized (writableSignal) {
                if (!channel.isWritable() && channel.isOpen()) {
                    TimeUnit.NANOSECONDS.timedWait(writableSignal, nanos); // bounded: a close is not signalled
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public boolean blockUntilWritable(long timeout, TimeUnit timeUnit) {
        if (Thread.currentThread() == loopThread) {
            return channel.isWritable();
        }
        long deadline = System.nanoTime() + timeUnit.toNanos(timeout);
        while (!channel.isWritable()) {
            if (!channel.isOpen()) {
                throw new IllegalStateException("RDMA connection " + getID() + " closed or disconnected");
            }
            long remaining = deadline - System.nanoTime();
            if (remaining <= 0) {
                return false;
            }
            awaitWritable(Math.min(remaining, RESUME_WAIT_NANOS));
            if (Thread.currentThread().isInterrupted()) {
                return channel.isWritable();
            }
        }
        return true;
    }

    @Override
    public void setAutoRead(boolean autoRead) {
        channel.setAutoRead(autoRead);
    }

    // ---- lifecycle ----

    @Override
    public boolean isOpen() {
        return !closed.get() && channel.isOpen();
    }

    /** Orderly close: packets already written go first. Tells the listener the connection was closed, not lost. */
    @Override
    public void close() {
        if (closed.compareAndSet(false, true)) {
            channel.close();
            listener.connectionDestroyed(getID(), false);
        }
    }

    /** Closes the channel at once and tells nobody (the caller is the one that decided). */
    @Override
    public void forceClose() {
        closed.set(true);
        channel.forceClose();
    }

    /** Closes the channel as the acceptor stops, and reports the connection as failed so clients fail over. */
    void destroy() {
        if (closed.compareAndSet(false, true)) {
            channel.close();
            listener.connectionDestroyed(getID(), true);
        }
    }

    // ---- identity and configuration ----

    @Override
    public Object getID() {
        return channel.id();
    }

    @Override
    public RemotingConnection getProtocolConnection() {
        return protocolConnection;
    }

    @Override
    public void setProtocolConnection(RemotingConnection connection) {
        this.protocolConnection = connection;
    }

    @Override
    public EventLoop getEventLoop() {
        throw new UnsupportedOperationException("RDMA connections carry CORE only and have no Netty event loop");
    }

    @Override
    public String getRemoteAddress() {
        return address(channel.remoteAddress());
    }

    @Override
    public String getLocalAddress() {
        return address(channel.localAddress());
    }

    private static String address(InetSocketAddress address) {
        return SocketAddressUtil.toString(address);
    }

    @Override
    public TransportConfiguration getConnectorConfig() {
        return new TransportConfiguration(RdmaConnectorFactory.class.getName(), endpointParams);
    }

    @Override
    public boolean isSameTarget(TransportConfiguration... configs) {
        for (TransportConfiguration config : configs) {
            if (config != null && RdmaConnectorFactory.class.getName().equals(config.getFactoryClassName())
                    && RdmaParameters.sameEndpoint(endpointParams, config.getParams())) {
                return true;
            }
        }
        return false;
    }

    @Override
    public boolean isDirectDeliver() {
        return directDeliver;
    }

    @Override
    public ActiveMQPrincipal getDefaultActiveMQPrincipal() {
        return null;
    }

    @Override
    public boolean isUsingProtocolHandling() {
        return false;
    }

    @Override
    public String toString() {
        RdmaChannel ch = channel;
        return "RdmaConnection[id=" + (ch == null ? "unbound" : ch.id()) + ", local=" + (ch == null ? null
                : getLocalAddress()) + ", remote=" + (ch == null ? null : getRemoteAddress()) + "]";
    }
}
