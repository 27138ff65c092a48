package dev.artemisrdma.transport;

import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Send buffers in registered memory for one device, in power-of-two size classes from 256 bytes to 1 MiB. Each
 * class grows by registering a slab and carving it up once; buffers then cycle through a free stack, so
 * steady-state allocation neither allocates on the Java heap nor registers memory. Frames above 1 MiB (rare:
 * Artemis splits large messages) get a registration of their own, deregistered once sent.
 *
 * <p>Thread-safe: callers allocate from any thread; completion loops free.
 */
final class BufferPool implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(BufferPool.class);
    static final int MIN_CLASS = 256;
    static final int MAX_CLASS = 1 << 20;
    private static final int SLAB_BYTES = 1 << 20;

    private final FabricDevice device;
    private final SizeClass[] classes;
    private final List<RegisteredMemory> slabs = new ArrayList<>();
    private boolean closed;

    BufferPool(FabricDevice device) {
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
    PooledBuffer.Lease allocate(int capacity) throws FabricException {
        if (capacity < 0) {
            throw new IllegalArgumentException("capacity " + capacity);
        }
        PooledBuffer b;
        if (capacity > MAX_CLASS) {
            RegisteredMemory own = register(capacity);
            b = new PooledBuffer(this, null, own, 0, capacity);
        } else {
            int size = Math.max(MIN_CLASS, Integer.highestOneBit(Math.max(1, capacity - 1)) << 1);
            b = classes[Integer.numberOfTrailingZeros(size) - Integer.numberOfTrailingZeros(MIN_CLASS)].take();
        }
        return b.acquire();
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
    long registeredBytes() {
        synchronized (slabs) {
            long sum = 0;
            for (RegisteredMemory m : slabs) {
                sum += m.length();
            }
            return sum;
        }
    }

    /** Deregisters every slab; callers guarantee no posted work request still points into one. */
    @Override
    public void close() {
        synchronized (slabs) {
            closed = true;
            for (RegisteredMemory m : slabs) {
                m.close();
            }
            slabs.clear();
        }
    }

    /** Buffers of one size; a stack of free ones. */
    final class SizeClass {
        private final int size;
        private PooledBuffer[] free = new PooledBuffer[16];
        private int count;

        SizeClass(int size) {
            this.size = size;
        }

        synchronized PooledBuffer take() throws FabricException {
            if (count == 0) {
                grow();
            }
            PooledBuffer b = free[--count];
            free[count] = null;
            return b;
        }

        synchronized void free(PooledBuffer b) {
            if (count == free.length) {
                free = java.util.Arrays.copyOf(free, count * 2);
            }
            free[count++] = b;
        }

        private void grow() throws FabricException {
            int bytes = Math.max(SLAB_BYTES, size * 4);
            RegisteredMemory slab;
            synchronized (slabs) {
                if (closed) {
                    throw new FabricException("transport closed: cannot allocate send memory on " + device.name());
                }
                slab = device.register(bytes);
                slabs.add(slab);
            }
            LOG.debug("send pool on {}: registered {} bytes for {}-byte buffers", device.name(), bytes, size);
            int n = bytes / size;
            if (free.length < count + n) {
                free = java.util.Arrays.copyOf(free, Math.max(free.length * 2, count + n));
            }
            for (int i = 0; i < n; i++) {
                free[count++] = new PooledBuffer(BufferPool.this, this, slab, i * size, size);
            }
        }
    }
}
