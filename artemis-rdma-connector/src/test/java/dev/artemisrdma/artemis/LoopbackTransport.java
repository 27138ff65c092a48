package dev.artemisrdma.artemis;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;

import dev.artemisrdma.transport.ChannelHandler;
import dev.artemisrdma.transport.FabricException;
import dev.artemisrdma.transport.RdmaChannel;
import dev.artemisrdma.transport.SendBuffer;

/**
 * An in-JVM stand-in for the transport protocol, for testing the Artemis adapter by itself: channel pairs with one
 * delivery thread per channel, frame boundaries kept, a bounded receive backlog driving {@code isWritable}, and
 * {@code setAutoRead(false)} pausing delivery. Counts registered buffers to catch leaks and double releases.
 */
final class LoopbackTransport implements ChannelTransport {

    static final AtomicLong buffersOut = new AtomicLong();
    static final AtomicLong doubleReleases = new AtomicLong();
    /** Frames written from registered memory (zero copy) and frames the adapter had to copy. */
    static final AtomicLong registeredWrites = new AtomicLong();
    static final AtomicLong copiedWrites = new AtomicLong();

    private static final int HIGH_WATER = 64;
    private static final AtomicInteger ids = new AtomicInteger();

    private static final Map<InetSocketAddress, Function<RdmaChannel, ChannelHandler>> listeners =
            new ConcurrentHashMap<>();
    private final Set<Channel> channels = ConcurrentHashMap.newKeySet();

    @Override
    public AutoCloseable listen(InetSocketAddress address, Function<RdmaChannel, ChannelHandler> onAccepted)
            throws FabricException {
        if (listeners.putIfAbsent(address, onAccepted) != null) {
            throw new FabricException("address in use: " + address);
        }
        return () -> listeners.remove(address, onAccepted);
    }

    @Override
    public RdmaChannel connect(InetSocketAddress address, ChannelHandler handler) throws FabricException {
        Function<RdmaChannel, ChannelHandler> acceptor = listeners.get(address);
        if (acceptor == null) {
            throw new FabricException("connection to " + address + " refused: nobody listens");
        }
        InetSocketAddress clientAddress = new InetSocketAddress("127.0.0.1", 40000 + ids.incrementAndGet());
        Channel client = new Channel("c" + ids.incrementAndGet(), clientAddress, address);
        Channel server = new Channel("s" + ids.incrementAndGet(), address, clientAddress);
        client.peer = server;
        server.peer = client;
        server.handler = acceptor.apply(server);
        client.handler = handler;
        return client;
    }

    @Override
    public void close() {
        for (Channel channel : channels) {
            channel.forceClose();
        }
    }

    static final class Buffer implements SendBuffer {
        private final ByteBuffer memory;
        private boolean released;

        Buffer(int capacity) {
            memory = ByteBuffer.allocateDirect(capacity);
            buffersOut.incrementAndGet();
        }

        @Override
        public ByteBuffer buffer() {
            return memory;
        }

        @Override
        public synchronized void release() {
            if (released) {
                doubleReleases.incrementAndGet();
                return;
            }
            released = true;
            buffersOut.decrementAndGet();
        }
    }

    final class Channel implements RdmaChannel {
        private final String id;
        private final InetSocketAddress local;
        private final InetSocketAddress remote;
        private final ExecutorService loop;
        private final ArrayDeque<Object> inbox = new ArrayDeque<>();
        private volatile Channel peer;
        private volatile ChannelHandler handler;
        private volatile boolean open = true;
        private boolean autoRead = true;
        private boolean writerBlocked;
        private boolean draining;
        private boolean finished;

        Channel(String id, InetSocketAddress local, InetSocketAddress remote) {
            this.id = id;
            this.local = local;
            this.remote = remote;
            this.loop = Executors.newSingleThreadExecutor(r -> new Thread(r, "loopback-" + id));
            channels.add(this);
        }

        @Override
        public String id() {
            return id;
        }

        @Override
        public InetSocketAddress localAddress() {
            return local;
        }

        @Override
        public InetSocketAddress remoteAddress() {
            return remote;
        }

        @Override
        public SendBuffer allocate(int capacity) {
            return new Buffer(capacity);
        }

        @Override
        public void write(SendBuffer buffer, boolean flush) throws FabricException {
            try {
                registeredWrites.incrementAndGet();
                ByteBuffer frame = buffer.buffer().duplicate().flip();
                deliver(frame);
            } finally {
                buffer.release();
            }
        }

        @Override
        public void write(ByteBuffer frame, boolean flush) throws FabricException {
            copiedWrites.incrementAndGet();
            deliver(frame);
        }

        private void deliver(ByteBuffer frame) throws FabricException {
            if (!open) {
                throw new FabricException("channel " + id + " is closed");
            }
            ByteBuffer copy = ByteBuffer.allocate(frame.remaining());
            copy.put(frame.duplicate()).flip();
            peer.enqueue(copy);
        }

        @Override
        public void flush() {
        }

        @Override
        public boolean isWritable() {
            Channel p = peer;
            synchronized (p) {
                return p.inbox.size() < HIGH_WATER;
            }
        }

        @Override
        public synchronized void setAutoRead(boolean autoRead) {
            this.autoRead = autoRead;
            if (autoRead) {
                scheduleDrain();
            }
        }

        @Override
        public boolean isOpen() {
            return open;
        }

        private synchronized void enqueue(Object item) {
            inbox.add(item);
            if (inbox.size() >= HIGH_WATER) {
                peer.writerBlocked = true;
            }
            scheduleDrain();
        }

        private void scheduleDrain() {
            if (!draining) {
                draining = true;
                try {
                    loop.execute(this::drain);
                } catch (RejectedExecutionException closed) {
                    draining = false;
                }
            }
        }

        private void drain() {
            while (true) {
                Object item;
                synchronized (this) {
                    boolean isClose = inbox.peek() instanceof FabricException;
                    if (inbox.isEmpty() || (!autoRead && !isClose)) {
                        draining = false;
                        break;
                    }
                    item = inbox.poll();
                }
                if (item instanceof FabricException cause) {
                    terminate(cause);
                    return;
                }
                handler.onFrame(this, (ByteBuffer) item);
                Channel p = peer;
                boolean wake;
                synchronized (this) {
                    wake = p.writerBlocked && inbox.size() < HIGH_WATER / 2;
                    if (wake) {
                        p.writerBlocked = false;
                    }
                }
                if (wake) {
                    p.loop.execute(() -> p.handler.onWritable(p));
                }
            }
            handler.onEndOfBatch(this);
        }

        private void terminate(FabricException cause) {
            open = false;
            synchronized (this) {
                if (finished) {
                    return;
                }
                finished = true;
            }
            channels.remove(this);
            handler.onClosed(this, cause);
            loop.shutdown();
        }

        @Override
        public void close() {
            if (!open) {
                return;
            }
            open = false;
            peer.enqueue(new FabricException("peer " + local + " disconnected"));
            try {
                loop.execute(() -> terminate(null));
            } catch (RejectedExecutionException alreadyClosed) {
                // the peer's close got here first
            }
        }

        @Override
        public void forceClose() {
            close();
        }
    }
}
