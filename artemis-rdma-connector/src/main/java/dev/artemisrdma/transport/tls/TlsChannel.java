package dev.artemisrdma.transport.tls;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;

import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLEngineResult;
import javax.net.ssl.SSLException;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.api.SendBuffer;
import dev.artemisrdma.transport.api.TlsEngineFactory;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.LogLimiter;
import dev.artemisrdma.transport.fabric.SpinningLock;
import dev.artemisrdma.transport.stats.ChannelCounters;
import dev.artemisrdma.transport.stats.TransportStats;

/**
 * TLS over one RDMA channel (the <em>wire</em>): the application's frames go through the JDK's {@link SSLEngine} and
 * leave as wire frames of whole TLS records, so framing, packing, fragmentation and credits stay the wire's. One
 * application frame is one wire frame (all its records, about 16 KiB of plaintext each), so a frame's boundary needs
 * no length of its own; the TLS handshake's flights and post-handshake messages travel as wire frames of their own.
 *
 * <p>Threads: {@link #onFrame} and the other wire callbacks come from the wire's completion loop, which alone unwraps.
 * Writers wrap on their own thread under {@link #wrapLock}, which also holds the record order on the wire: a record
 * wrapped first is written first (the wire's write never blocks, so holding the lock across it costs no wait). A
 * writer's wrap and the loop's unwrap meet at the engine, which takes one lock for both: {@link #engineGate} serializes
 * them before it, spinning (see there). The
 * engine's delegated tasks (certificate checks, key exchange) run on the thread that meets them, as Netty's SslHandler
 * does by default: a handshake costs its completion loop a few milliseconds.
 *
 * <p>The application hears of the channel only once the handshake is done: a listener's acceptor is called then, and a connector's {@code connect} returns then; a peer that fails the handshake, or does not finish it
 * within the factory's timeout, is disconnected without the application ever seeing it.
 */
public final class TlsChannel implements RdmaChannel, ChannelHandler {

    private static final Logger LOG = LoggerFactory.getLogger(TlsChannel.class);
    private static final LogLimiter HANDSHAKE_FAILED = LogLimiter.site(LOG, Level.WARN, "failed TLS handshakes");
    /**
     * The engine reads and writes heap buffers: the JDK's AES-GCM on direct buffers cost about 2.5 times as much at
     * 64 KiB (Netty's SslHandler hands the JDK engine heap buffers too). So records and plaintext are staged in
     * per-thread heap buffers, one pair for unwrapping (the completion loop's; the application may not keep the
     * plaintext past its call) and one for wrapping (each writer's), and copied from the receive slot and into
     * registered send memory: two memcpy, far cheaper than the cipher's penalty. Kept up to {@value #KEPT_SCRATCH}
     * bytes each, so idle connections hold none; a larger frame gets buffers of its own.
     */
    private static final int KEPT_SCRATCH = 1 << 20;
    private static final ThreadLocal<HeapScratch> UNWRAP_SCRATCH = ThreadLocal.withInitial(HeapScratch::new);
    private static final ThreadLocal<HeapScratch> WRAP_SCRATCH = ThreadLocal.withInitial(HeapScratch::new);
    private static final ByteBuffer EMPTY = ByteBuffer.allocate(0);
    /** Half of TLS's largest record plaintext (2^14 bytes): fewer plaintext bytes than the engine puts in a record. */
    private static final int HALF_FRAGMENT = 8192;
    /**
     * The one-byte frame a listener sends first once its handshake is done and the peer passed every check: the
     * connector's {@code connect} returns on it, so a certificate the listener refuses fails the connect, not the
     * first message (TLS 1.3 ends the client's handshake before the server has read the client's certificate).
     */
    static final byte SERVED = 1;

    private final SSLEngine engine;
    /** Serializes wraps and the wire writes of their records. */
    private final ReentrantLock wrapLock = new ReentrantLock();
    /**
     * Taken around each steady-path {@code engine.wrap} (a writer's, under {@link #wrapLock}) and {@code engine.unwrap}
     * (the completion loop's), and never held while taking another lock. The JDK's engine serializes both on one
     * {@code ReentrantLock} that parks at once: a writer's wrap and the loop's unwrap of the same connection (the
     * broker delivering while acknowledgements arrive, a consumer acknowledging while deliveries arrive) met there
     * often: in 6 s of the host bench's all-out 1 KiB phase (JFR {@code jdk.ThreadPark}) the completion loop parked
     * 970 times in {@code SSLEngineImpl.unwrap}, the consumer 576 and a broker thread 268 times in {@code wrap} or
     * {@code getSession}, each a park, a futex wake-up and a context switch. A record's wrap or unwrap lasts a
     * microsecond or two at 1 KiB: a {@link SpinningLock} waits it out without parking, so the engine's own lock is
     * free whenever we reach it. ({@code getSession} takes that lock too: hence {@link #packetSize}.)
     */
    private final ReentrantLock engineGate = new SpinningLock();
    /** The engine's {@code getPacketBufferSize()}, read once (the engine takes its lock to answer); under wrapLock. */
    private int packetSize;
    private final CompletableFuture<Void> handshake = new CompletableFuture<>();
    private final AtomicBoolean closing = new AtomicBoolean();
    /** A listener's application, asked for the handler when the handshake is done; null on a connector's channel. */
    private final Function<RdmaChannel, ChannelHandler> acceptor;
    private volatile RdmaChannel wire;
    private volatile ChannelHandler app;
    /** Why this side ended the connection (a failed handshake or record), reported instead of a local close. */
    private volatile FabricException failure;
    private ScheduledFuture<?> deadline;

    private TlsChannel(SSLEngine engine, ChannelHandler app, Function<RdmaChannel, ChannelHandler> acceptor) {
        this.engine = engine;
        this.app = app;
        this.acceptor = acceptor;
    }

    /**
     * The handler a connector's wire channel is made with; {@link #startClient} follows once the wire is connected.
     */
    public static TlsChannel forConnector(SSLEngine engine, ChannelHandler app) {
        if (!engine.getUseClientMode()) {
            throw new IllegalArgumentException("a connector's TLS engine must be in client mode");
        }
        return new TlsChannel(engine, app, null);
    }

    /**
     * The handler of a listener's established {@code wire}: runs the server side of the handshake and, once it is
     * done, offers the channel to {@code offer} (the application's acceptor), whose handler then gets its events;
     * throwing or null closes it. {@code timer} enforces the factory's handshake timeout, whose close runs on
     * {@code closers}.
     */
    public static TlsChannel forListener(RdmaChannel wire, TlsEngineFactory tls,
                                         Function<RdmaChannel, ChannelHandler> offer,
                                         ScheduledExecutorService timer, Executor closers) {
        SSLEngine engine = tls.newEngine(wire.remoteAddress()); // throwing closes the connection
        if (engine.getUseClientMode()) {
            throw new IllegalStateException("a listener's TLS engine must be in server mode");
        }
        TlsChannel t = new TlsChannel(engine, null, offer);
        t.wire = wire;
        t.armDeadline(timer, closers, tls);
        return t;
    }

    /**
     * Starts the client's handshake over the connected {@code wire} and waits for it, at most the factory's handshake
     * timeout. On failure the wire is closed and the exception says why (the peer's alert, or the check that failed).
     */
    public void startClient(RdmaChannel connected, TlsEngineFactory tls) throws FabricException {
        if (wire == null) {
            wire = connected;
        }
        try {
            engine.beginHandshake();
            wrapLock.lock();
            try {
                wrapHandshake();
            } finally {
                wrapLock.unlock();
            }
        } catch (SSLException | FabricException e) {
            fail("TLS handshake with " + remoteAddress() + " failed: " + message(e), e);
        }
        try {
            long nanos = tls.handshakeTimeout().toNanos();
            if (nanos > 0) {
                handshake.get(nanos, TimeUnit.NANOSECONDS);
            } else {
                handshake.get(); // 0: no timeout, as Artemis's sslHandshakeTimeout=0
            }
        } catch (java.util.concurrent.TimeoutException e) {
            fail("TLS handshake with " + remoteAddress() + " did not finish within " + tls.handshakeTimeout()
                    .toMillis() + " ms (sslHandshakeTimeout)", null);
            throw failure;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            wire.forceClose();
            throw new FabricException("TLS handshake with " + remoteAddress() + " interrupted");
        } catch (java.util.concurrent.ExecutionException e) {
            throw failure != null ? failure : new FabricException("TLS handshake with " + remoteAddress()
                    + " failed: " + message(e.getCause()), e.getCause());
        }
    }

    private void armDeadline(ScheduledExecutorService timer, Executor closers, TlsEngineFactory tls) {
        long nanos = tls.handshakeTimeout().toNanos();
        if (nanos <= 0) {
            return; // 0: no timeout, as Artemis's sslHandshakeTimeout=0
        }
        // the close waits for the channel's teardown: on a closer thread, never the transport's timer
        deadline = timer.schedule(() -> closers.execute(() -> {
            if (!handshake.isDone()) {
                fail("TLS handshake with " + remoteAddress() + " did not finish within "
                        + TimeUnit.NANOSECONDS.toMillis(nanos) + " ms (sslHandshakeTimeout)", null);
            }
        }), nanos, TimeUnit.NANOSECONDS);
    }

    // ---- the wire's events (its completion loop) ----

    @Override
    public void onFrame(RdmaChannel channel, ByteBuffer frame) {
        if (wire == null) {
            wire = channel;
        }
        if (failure != null) {
            return; // failed: what follows is not read
        }
        HeapScratch scratch = UNWRAP_SCRATCH.get();
        ByteBuffer records = scratch.first(frame.remaining());
        records.put(frame).flip();
        ByteBuffer plain = scratch.second(records.remaining());
        try {
            while (records.hasRemaining()) {
                SSLEngineResult r;
                engineGate.lock();
                try {
                    r = engine.unwrap(records, plain);
                } finally {
                    engineGate.unlock();
                }
                switch (r.getStatus()) {
                    case BUFFER_OVERFLOW -> plain = grow(plain, engine.getSession().getApplicationBufferSize());
                    case BUFFER_UNDERFLOW -> throw new SSLException("a frame of " + records.limit()
                            + " bytes ends inside a TLS record (not an artemis-rdma TLS peer?)");
                    case CLOSED -> {
                        // the peer's close_notify: its disconnect follows and reports the cause to the application
                        records.position(records.limit());
                    }
                    default -> {
                    }
                }
                afterEngineStep(r.getHandshakeStatus());
            }
            plain.flip();
            if (plain.hasRemaining()) {
                if (!handshake.isDone()) {
                    acceptedByListener(plain); // a connector's first frame: the listener's word that it is served
                } else {
                    app.onFrame(this, plain);
                }
            }
        } catch (SSLException | FabricException e) {
            fail("TLS " + (handshake.isDone() ? "record from " : "handshake with ") + remoteAddress() + " failed: "
                    + message(e), e);
        }
    }

    /** Runs what the engine asks after a step: its tasks, a handshake flight to send, the handshake's end. */
    private void afterEngineStep(SSLEngineResult.HandshakeStatus status) throws SSLException, FabricException {
        while (true) {
            switch (status) {
                case NEED_TASK -> {
                    Runnable task;
                    while ((task = engine.getDelegatedTask()) != null) {
                        task.run();
                    }
                    status = engine.getHandshakeStatus();
                }
                case NEED_WRAP -> {
                    wrapLock.lock();
                    try {
                        status = wrapHandshake();
                    } finally {
                        wrapLock.unlock();
                    }
                }
                case FINISHED -> {
                    handshakeDone();
                    return;
                }
                default -> {
                    return; // NEED_UNWRAP: the peer's next flight; NOT_HANDSHAKING
                }
            }
        }
    }

    /** Wraps and sends handshake (or alert) records while the engine has them; under {@link #wrapLock}. */
    private SSLEngineResult.HandshakeStatus wrapHandshake() throws SSLException, FabricException {
        SSLEngineResult.HandshakeStatus status = engine.getHandshakeStatus();
        while (status == SSLEngineResult.HandshakeStatus.NEED_WRAP) {
            SendBuffer out = wire.allocate(engine.getSession().getPacketBufferSize());
            SSLEngineResult r;
            try {
                r = engine.wrap(EMPTY, out.buffer());
            } catch (SSLException | RuntimeException e) {
                out.release();
                throw e;
            }
            if (out.buffer().position() > 0) {
                wire.write(out, true);
            } else {
                out.release();
            }
            status = r.getHandshakeStatus();
            if (status == SSLEngineResult.HandshakeStatus.FINISHED) {
                handshakeDone();
                return SSLEngineResult.HandshakeStatus.NOT_HANDSHAKING;
            }
            if (r.getStatus() == SSLEngineResult.Status.CLOSED) {
                break;
            }
        }
        return status;
    }

    /**
     * The engine finished the handshake. A listener now tells the connector it is served and offers the connection to
     * the application; a connector waits for that word ({@link #acceptedByListener}), since in TLS 1.3 its handshake
     * ends before the listener has checked its certificate.
     */
    private void handshakeDone() throws FabricException {
        if (acceptor == null || handshake.isDone()) {
            return;
        }
        if (deadline != null) {
            deadline.cancel(false);
        }
        write(ByteBuffer.wrap(new byte[] {SERVED}), true);
        handshake.complete(null);
        // the application makes its side of the connection only now; throwing or null closes it
        ChannelHandler h;
        try {
            h = acceptor.apply(this);
        } catch (RuntimeException | Error e) {
            fail("connection from " + remoteAddress() + " refused by the application after the TLS handshake: " + e,
                    e);
            return;
        }
        if (h == null) {
            fail("connection from " + remoteAddress() + " refused by the application", null);
            return;
        }
        app = h;
    }

    /** The connector's first frame, which the application never sees: the listener's {@link #SERVED}. */
    private void acceptedByListener(ByteBuffer frame) throws SSLException {
        if (acceptor != null || frame.remaining() != 1 || frame.get(frame.position()) != SERVED) {
            throw new SSLException("application data before the TLS handshake finished");
        }
        handshake.complete(null);
    }

    @Override
    public void onEndOfBatch(RdmaChannel channel) {
        ChannelHandler h = app;
        if (h != null && handshake.isDone()) {
            h.onEndOfBatch(this);
        }
    }

    @Override
    public void onWritable(RdmaChannel channel) {
        ChannelHandler h = app;
        if (h != null && handshake.isDone()) {
            h.onWritable(this);
        }
    }

    @Override
    public void onClosed(RdmaChannel channel, FabricException cause) {
        if (deadline != null) {
            deadline.cancel(false);
        }
        FabricException why = failure != null ? failure : cause;
        if (!handshake.isDone()) {
            handshake.completeExceptionally(why != null ? why
                    : new FabricException("connection to " + remoteAddress() + " closed during the TLS handshake"));
            if (acceptor != null) {
                return; // the application never saw this connection
            }
        }
        ChannelHandler h = app;
        if (h != null) {
            h.onClosed(this, why);
        }
    }

    /** Ends the connection for {@code why}: the alert the engine has (if any) goes first, then the wire closes. */
    private void fail(String why, Throwable cause) {
        if (failure != null) {
            return;
        }
        FabricException f = new FabricException(why, cause);
        failure = f;
        if (acceptor != null && !handshake.isDone() && HANDSHAKE_FAILED.admit()) {
            LOG.warn("connection {}: {}", wire == null ? "?" : wire.id(), why);
        }
        RdmaChannel w = wire;
        if (w == null) {
            return;
        }
        if (wrapLock.tryLock()) {
            try {
                engine.closeOutbound();
                wrapHandshake(); // the alert or close_notify, so the peer reads why
            } catch (SSLException | FabricException | RuntimeException ignored) {
                // nothing more can be said to the peer
            } finally {
                wrapLock.unlock();
            }
        }
        handshake.completeExceptionally(f);
        w.close(); // orderly: the alert leaves before the disconnect
    }

    // ---- the application's side ----

    @Override
    public SendBuffer allocate(int capacity) {
        return wire.allocate(capacity); // plaintext staging in registered memory: pooled, nothing allocated
    }

    @Override
    public void write(SendBuffer buffer, boolean flush) throws FabricException {
        try {
            ByteBuffer plain = buffer.buffer().duplicate();
            plain.flip();
            write(plain, flush);
        } finally {
            buffer.release();
        }
    }

    @Override
    public void write(ByteBuffer frame, boolean flush) throws FabricException {
        FabricException failed = failure;
        if (failed != null) {
            throw new FabricException("connection closed: " + failed.getMessage(), failed);
        }
        int length = frame.remaining();
        wrapLock.lock();
        try {
            HeapScratch scratch = WRAP_SCRATCH.get();
            ByteBuffer plain = scratch.first(length);
            plain.put(frame).flip();
            int packetSize = this.packetSize;
            if (packetSize == 0) {
                packetSize = this.packetSize = engine.getSession().getPacketBufferSize();
            }
            ByteBuffer records = scratch.second(cipherBound(length, packetSize));
            try {
                do {
                    SSLEngineResult r;
                    engineGate.lock();
                    try {
                        r = engine.wrap(plain, records);
                    } finally {
                        engineGate.unlock();
                    }
                    if (r.getStatus() == SSLEngineResult.Status.BUFFER_OVERFLOW) {
                        // less room than cipherBound gave (records smaller than it assumed, or a packet size that
                        // changed): room for more, kept for the next frames
                        packetSize = this.packetSize = engine.getSession().getPacketBufferSize();
                        records = scratch.keepSecond(grow(records, 2 * packetSize + plain.remaining()));
                    } else if (r.getStatus() == SSLEngineResult.Status.CLOSED) {
                        throw new FabricException("connection " + id() + " to " + remoteAddress()
                                + " is closing: TLS is closed");
                    }
                } while (plain.hasRemaining());
            } catch (SSLException e) {
                fail("TLS record to " + remoteAddress() + " failed: " + message(e), e);
                throw failure;
            }
            records.flip();
            if (!records.hasRemaining()) {
                return; // an empty frame makes no record: nothing to send, nothing the peer would deliver
            }
            SendBuffer out = wire.allocate(records.remaining());
            out.buffer().put(records);
            wire.write(out, flush);
        } finally {
            wrapLock.unlock();
        }
    }

    /**
     * Room for {@code length} bytes of plaintext as records. The JDK's engine wraps only into at least
     * {@code packetSize} bytes of room ({@code getPacketBufferSize()}, 16709 with TLS 1.3), however small the record,
     * and fills a record with a little less than TLS's 16 KiB (16367 bytes with TLS 1.3): so the room is the
     * plaintext, each record's overhead (counted as if records carried only 8 KiB, to be safe from the engine's
     * choice) and one whole packet for the last record. Too little room makes a wrap overflow and the records go
     * through a fresh heap buffer: it did, at every frame of up to about 15 KiB (3 per 1 KiB JMS message, 33 KiB
     * allocated each).
     */
    static int cipherBound(int length, int packetSize) {
        long records = Math.max(1, (length + HALF_FRAGMENT - 1L) / HALF_FRAGMENT);
        int overhead = Math.max(256, packetSize - 2 * HALF_FRAGMENT);
        return (int) Math.min(Integer.MAX_VALUE, length + records * overhead + packetSize);
    }

    @Override
    public void close() {
        if (!closing.compareAndSet(false, true)) {
            return;
        }
        wrapLock.lock();
        try {
            engine.closeOutbound();
            wrapHandshake(); // close_notify, ahead of the wire's goodbye
        } catch (SSLException | FabricException | RuntimeException ignored) {
            // closing anyway
        } finally {
            wrapLock.unlock();
        }
        wire.close();
    }

    @Override
    public void forceClose() {
        closing.set(true);
        wire.forceClose();
    }

    @Override
    public void flush() throws FabricException {
        wire.flush();
    }

    @Override
    public boolean isWritable() {
        return wire.isWritable();
    }

    @Override
    public void setAutoRead(boolean autoRead) {
        wire.setAutoRead(autoRead);
    }

    @Override
    public boolean isOpen() {
        return failure == null && wire.isOpen();
    }

    @Override
    public String id() {
        return wire.id();
    }

    @Override
    public InetSocketAddress localAddress() {
        return wire.localAddress();
    }

    @Override
    public InetSocketAddress remoteAddress() {
        RdmaChannel w = wire;
        return w == null ? null : w.remoteAddress();
    }

    @Override
    public TransportStats stats() {
        return wire.stats();
    }

    @Override
    public ChannelCounters counters() {
        return wire.counters();
    }

    @Override
    public long registeredBytes() {
        return wire.registeredBytes();
    }

    @Override
    public boolean olderPeer() {
        return wire.olderPeer();
    }

    @Override
    public SharedPool sharedPool() {
        return wire.sharedPool();
    }

    /** The negotiated protocol and suite, for logs and tests. */
    public String describeSession() {
        return engine.getSession().getProtocol() + " " + engine.getSession().getCipherSuite();
    }

    @Override
    public String toString() {
        return "TlsChannel[" + wire + "]";
    }

    /** A copy of {@code full}'s written part with {@code more} bytes of room beyond it (heap). */
    private static ByteBuffer grow(ByteBuffer full, int more) {
        ByteBuffer bigger = ByteBuffer.allocate(full.position() + more);
        full.flip();
        bigger.put(full);
        return bigger;
    }

    /** Two heap buffers of one thread, cleared when handed out (see {@link #KEPT_SCRATCH}). */
    private static final class HeapScratch {
        private ByteBuffer first = ByteBuffer.allocate(0);
        private ByteBuffer second = ByteBuffer.allocate(0);

        ByteBuffer first(int atLeast) {
            ByteBuffer b = fit(first, atLeast);
            if (b.capacity() <= KEPT_SCRATCH) {
                first = b;
            }
            return b;
        }

        ByteBuffer second(int atLeast) {
            ByteBuffer b = fit(second, atLeast);
            if (b.capacity() <= KEPT_SCRATCH) {
                second = b;
            }
            return b;
        }

        /** {@code grown} (a buffer grown from {@link #second}) is kept in its place, if not too large; returned. */
        ByteBuffer keepSecond(ByteBuffer grown) {
            if (grown.capacity() <= KEPT_SCRATCH) {
                second = grown;
            }
            return grown;
        }

        private static ByteBuffer fit(ByteBuffer kept, int atLeast) {
            if (kept.capacity() >= atLeast) {
                return kept.clear();
            }
            if (atLeast > KEPT_SCRATCH) {
                return ByteBuffer.allocate(atLeast); // this frame's own
            }
            // most frames are small: powers of two from 16 KiB
            return ByteBuffer.allocate(Math.min(KEPT_SCRATCH, Math.max(16 * 1024,
                    Integer.highestOneBit(atLeast - 1) << 1)));
        }
    }

    private static String message(Throwable e) {
        String m = e.getMessage();
        return m == null ? e.getClass().getSimpleName() : m;
    }
}
