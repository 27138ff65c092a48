package dev.artemisrdma.transport.flow;

import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.RegisteredMemory;

/**
 * Send buffers in registered memory for one device, in power-of-two size classes from 256 bytes to 1 MiB. Each
 * class grows by registering a slab and carving it up once; buffers then cycle through a free stack, so
 * steady-state allocation neither allocates on the Java heap nor registers memory. Frames above 1 MiB (rare:
 * Artemis splits large messages) get a registration of their own, deregistered once sent. A slab none of whose
 * buffers has been in use for a while is deregistered by {@link #trim}, so a burst does not pin memory for ever.
 *
 * <p>Headroom. Every buffer has {@link #HEADROOM} bytes of the same registration in front of it, which no caller
 * sees: a SEND that starts at the buffer's first byte (a whole frame, a first fragment, a pack) gets its frame header
 * written there and leaves as one scatter-gather entry instead of two (header and payload). On rxe every entry of a
 * SEND is a memory-region lookup and a copy of its own in the kernel (lab, one boot: a 1 KiB stream 6-12 % faster;
 * latency unchanged within the lab's noise).
 *
 * <p>Thread-safe: callers allocate from any thread; completion loops free.
 */
public final class BufferPool implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(BufferPool.class);
    static final int MIN_CLASS = 256;
    static final int MAX_CLASS = 1 << 20;
    private static final int SLAB_BYTES = 1 << 20;
    /** Registered bytes in front of every buffer, for the frame header (16: payloads stay 16-byte aligned). */
    static final int HEADROOM = 16;

    private final FabricDevice device;
    private final SizeClass[] classes;
    private final List<RegisteredMemory> slabs = new ArrayList<>();
    private volatile boolean closed;

    public BufferPool(FabricDevice device) {
        this.device = device;
        int n = Integer.numberOfTrailingZeros(MAX_CLASS) - Integer.numberOfTrailingZeros(MIN_CLASS) + 1;
        classes = new SizeClass[n];
        for (int i = 0; i < n; i++) {
            classes[i] = new SizeClass(MIN_CLASS << i);
        }
    }

    FabricDevice device() {
        return device;
    }

    /** A buffer of at least {@code capacity} bytes, owned by the caller through the lease returned. */
    public PooledBuffer.Lease allocate(int capacity) throws FabricException {
        return take(capacity).acquire();
    }

    /**
     * A buffer of at least {@code capacity} bytes owned by a channel from the start, for what the channel fills
     * itself (a copied frame, a pack): no lease, as no caller holds it, so taking one allocates nothing. The channel
     * gives it back with {@link PooledBuffer#releaseFromChannel()} once no work request points into it.
     */
    public PooledBuffer allocateForChannel(int capacity) throws FabricException {
        PooledBuffer b = take(capacity);
        b.acquireForChannel();
        return b;
    }

    private PooledBuffer take(int capacity) throws FabricException {
        if (capacity < 0) {
            throw new IllegalArgumentException("capacity " + capacity);
        }
        if (capacity > MAX_CLASS) {
            RegisteredMemory own = register(capacity + HEADROOM);
            return new PooledBuffer(this, null, null, own, HEADROOM, capacity);
        }
        int size = Math.max(MIN_CLASS, Integer.highestOneBit(Math.max(1, capacity - 1)) << 1);
        return classes[Integer.numberOfTrailingZeros(size) - Integer.numberOfTrailingZeros(MIN_CLASS)].take();
    }

    private RegisteredMemory register(int bytes) throws FabricException {
        synchronized (slabs) {
            if (closed) {
                throw new FabricException("transport closed: cannot allocate send memory on " + device.name());
            }
        }
        return device.register(bytes);
    }

    /** Bytes of the slabs registered so far (frames above MAX_CLASS, registered alone and briefly, excluded). */
    public long registeredBytes() {
        synchronized (slabs) {
            long sum = 0;
            for (RegisteredMemory m : slabs) {
                sum += m.length();
            }
            return sum;
        }
    }

    /** Deregisters every slab that has had no buffer out for {@code idleNanos} (as of {@code now}). */
    public int trim(long now, long idleNanos) {
        int released = 0;
        for (SizeClass c : classes) {
            released += c.trim(now, idleNanos);
        }
        return released;
    }

    /** Registered slabs, for tests and monitoring. */
    public int slabCount() {
        synchronized (slabs) {
            return slabs.size();
        }
    }

    /**
     * Deregisters every slab none of whose buffers is out; callers guarantee no posted work request still points into
     * one. A slab with a buffer still out (a writer encoding into it while the transport closes) is deregistered when
     * its last buffer comes back: unmapping it now would turn that writer's next put into a JVM crash.
     */
    @Override
    public void close() {
        synchronized (slabs) {
            closed = true;
        }
        for (SizeClass c : classes) {
            c.closeIdleSlabs();
        }
    }

    /** A slab of one size class: how many of its buffers are out, and since when none is. */
    static final class Slab {
        final RegisteredMemory memory;
        final long start;
        final long end;
        int inUse;
        long idleSince;

        Slab(RegisteredMemory memory, long now) {
            this.memory = memory;
            this.start = memory.address();
            this.end = start + memory.length();
            this.idleSince = now;
        }

        boolean holds(PooledBuffer b) {
            return b.address() >= start && b.address() < end;
        }
    }

    /** Buffers of one size; a stack of free ones. */
    final class SizeClass {
        private final int size;
        private final List<Slab> own = new ArrayList<>();
        private PooledBuffer[] free = new PooledBuffer[16];
        private int count;

        SizeClass(int size) {
            this.size = size;
        }

        synchronized PooledBuffer take() throws FabricException {
            if (closed) {
                throw new FabricException("transport closed: cannot allocate send memory on " + device.name());
            }
            if (count == 0) {
                grow();
            }
            PooledBuffer b = free[--count];
            free[count] = null;
            b.slab.inUse++; // the buffer knows its slab: no scan of every slab, twice per message
            return b;
        }

        synchronized void free(PooledBuffer b) {
            if (count == free.length) {
                free = java.util.Arrays.copyOf(free, count * 2);
            }
            free[count++] = b;
            Slab slab = b.slab;
            if (--slab.inUse == 0) {
                slab.idleSince = System.nanoTime();
                if (closed) {
                    closeSlab(slab); // the pool closed while this buffer was out
                }
            }
        }

        /** At pool close: deregisters the slabs with no buffer out; the others follow their last buffer. */
        synchronized void closeIdleSlabs() {
            for (int i = own.size() - 1; i >= 0; i--) {
                Slab slab = own.get(i);
                if (slab.inUse == 0) {
                    closeSlab(slab);
                } else {
                    LOG.debug("send pool on {}: {}-byte slab has {} buffers out at close, deregistered when they "
                            + "come back", device.name(), size, slab.inUse);
                }
            }
        }

        /** Takes the slab's buffers off the free stack and deregisters it (once: trim and close both come here). */
        private void closeSlab(Slab slab) {
            int kept = 0;
            for (int j = 0; j < count; j++) {
                if (!slab.holds(free[j])) {
                    free[kept++] = free[j];
                }
            }
            java.util.Arrays.fill(free, kept, count, null);
            count = kept;
            own.remove(slab);
            synchronized (slabs) {
                if (slabs.remove(slab.memory)) {
                    slab.memory.close();
                }
            }
        }

        /** Deregisters slabs idle since {@code idleNanos} before {@code now}, their buffers leaving the stack. */
        public synchronized int trim(long now, long idleNanos) {
            int released = 0;
            for (int i = own.size() - 1; i >= 0; i--) {
                Slab slab = own.get(i);
                if (slab.inUse > 0 || now - slab.idleSince < idleNanos) {
                    continue;
                }
                closeSlab(slab);
                released++;
                LOG.debug("send pool on {}: {}-byte slab idle, deregistered", device.name(), size);
            }
            return released;
        }

        private void grow() throws FabricException {
            int stride = HEADROOM + size;
            int bytes = Math.max(SLAB_BYTES, stride * 4);
            RegisteredMemory slab;
            synchronized (slabs) {
                if (closed) {
                    throw new FabricException("transport closed: cannot allocate send memory on " + device.name());
                }
                slab = device.register(bytes);
                slabs.add(slab);
            }
            Slab carved = new Slab(slab, System.nanoTime());
            own.add(carved);
            LOG.debug("send pool on {}: registered {} bytes for {}-byte buffers", device.name(), bytes, size);
            int n = bytes / stride;
            if (free.length < count + n) {
                free = java.util.Arrays.copyOf(free, Math.max(free.length * 2, count + n));
            }
            for (int i = 0; i < n; i++) {
                free[count++] = new PooledBuffer(BufferPool.this, this, carved, slab, i * stride + HEADROOM, size);
            }
        }
    }
}
