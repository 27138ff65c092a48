package dev.artemisrdma.transport;

import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicLong;

import dev.artemisrdma.transport.fabric.CompletionQueue;
import dev.artemisrdma.transport.fabric.DeviceLimits;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.RegisteredMemory;
import dev.artemisrdma.transport.fabric.SharedReceiveQueue;

/**
 * A device as one transport sees it: every registration (connection memory, send buffer slabs, large frames) is
 * counted against {@code maxRegisteredMemory}, and one that would exceed it fails with the reason and the key that
 * raises it. Registered memory is pinned: without a bound, peers opening connections could pin all of it.
 */
final class AccountedDevice implements FabricDevice {

    private final FabricDevice device;
    private final long limit;
    private final AtomicLong registered = new AtomicLong();

    AccountedDevice(FabricDevice device, long limit) {
        this.device = device;
        this.limit = limit;
    }

    /** The device underneath, which identifies it. */
    FabricDevice raw() {
        return device;
    }

    /** Bytes registered through this view and not yet released. */
    long registeredBytes() {
        return registered.get();
    }

    @Override
    public String name() {
        return device.name();
    }

    @Override
    public DeviceLimits limits() {
        return device.limits();
    }

    @Override
    public RegisteredMemory register(int bytes) throws FabricException {
        long after = registered.addAndGet(bytes);
        if (after > limit) {
            registered.addAndGet(-bytes);
            // the key comes first: a reject's reason reaches the peer cut to about 130 bytes
            throw new FabricException("registered memory limit (raise maxRegisteredMemory) reached on " + device.name()
                    + ": " + (after - bytes) + " of " + limit + " bytes in use, " + bytes + " more needed");
        }
        try {
            return new Counted(device.register(bytes), bytes);
        } catch (FabricException | RuntimeException e) {
            registered.addAndGet(-bytes);
            throw e;
        }
    }

    @Override
    public CompletionQueue createCompletionQueue(int entries) throws FabricException {
        return device.createCompletionQueue(entries);
    }

    @Override
    public SharedReceiveQueue createSharedReceiveQueue(int maxReceives) throws FabricException {
        return device.createSharedReceiveQueue(maxReceives); // its receive buffers are registered (and counted) apart
    }

    @Override
    public String toString() {
        return device.toString();
    }

    /** Gives its bytes back to the budget once, when closed. */
    private final class Counted implements RegisteredMemory {
        private final RegisteredMemory memory;
        private final int bytes;
        private boolean closed;

        Counted(RegisteredMemory memory, int bytes) {
            this.memory = memory;
            this.bytes = bytes;
        }

        @Override
        public ByteBuffer buffer() {
            return memory.buffer();
        }

        @Override
        public long address() {
            return memory.address();
        }

        @Override
        public int lkey() {
            return memory.lkey();
        }

        @Override
        public int length() {
            return memory.length();
        }

        @Override
        public void close() {
            memory.close();
            synchronized (this) {
                if (closed) {
                    return;
                }
                closed = true;
            }
            registered.addAndGet(-bytes);
        }
    }
}
