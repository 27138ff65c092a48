package dev.artemisrdma.artemis;

import java.nio.ByteBuffer;
import java.util.function.IntFunction;

import dev.artemisrdma.transport.api.SendBuffer;
import io.netty.buffer.UnpooledByteBufAllocator;
import io.netty.buffer.UnpooledDirectByteBuf;

/**
 * A Netty buffer whose storage is a transport {@link SendBuffer} in registered memory, so a Core packet is encoded
 * straight into memory the NIC can send without a copy.
 *
 * <p>Packets often outgrow the size asked for ({@code Packet.INITIAL_PACKET_SIZE} is a guess), so the buffer grows
 * like any Netty buffer: Netty allocates the larger storage through {@link #allocateDirect}, copies, and switches; the
 * registered buffer it leaves is released here at once. When no registered buffer of the needed size can be had,
 * the storage becomes ordinary direct memory and {@link #takeSendBuffer} answers null: the writer then copies.
 *
 * <p>Ownership: the registered buffer is released exactly once, either when the last reference to this buffer is
 * released, or by the transport after {@link #takeSendBuffer} moved it there.
 *
 * <p>Threads: one per packet and, like any Netty buffer, not thread-safe: the Artemis thread that encodes the packet
 * makes it ({@link RdmaConnection#createTransportBuffer}), fills and grows it and, in {@code write}, takes its send
 * buffer. Only the release may come from another thread, ordered by Netty's atomic reference count.
 */
final class RegisteredByteBuf extends UnpooledDirectByteBuf {

    private final IntFunction<SendBuffer> allocator;
    private final Object owner;
    /** The registered buffer behind the current storage; null when the storage is unregistered or handed over. */
    private SendBuffer current;
    /** The registered buffer {@link #allocateDirect} produced during a capacity change, not yet switched to. */
    private SendBuffer pending;
    /** Set when {@link #allocateDirect} ran during the current capacity change. */
    private boolean switching;
    /**
     * The current storage as we handed it to Netty, index 0 at Netty's index 0 (Netty's own buffer is a slice of it or
     * it itself): byte arrays are written here with absolute puts, where Netty's direct buffer would make a duplicate
     * of its storage per ByteBuf for them (the encoder writes every body and string as a byte array).
     */
    private ByteBuffer storage;
    /** What {@link #allocateDirect} produced during the current capacity change. */
    private ByteBuffer pendingStorage;

    private RegisteredByteBuf(IntFunction<SendBuffer> allocator, Object owner, SendBuffer initial, ByteBuffer storage) {
        super(UnpooledByteBufAllocator.DEFAULT, storage, Integer.MAX_VALUE);
        this.allocator = allocator;
        this.owner = owner;
        this.current = initial;
        this.storage = storage;
        clear();
    }

    /**
     * A buffer of at least {@code capacity} bytes backed by {@code allocator}'s registered memory; {@code owner}
     * identifies the channel the memory belongs to. Falls back to unregistered memory if allocation fails.
     */
    static RegisteredByteBuf allocate(IntFunction<SendBuffer> allocator, Object owner, int capacity) {
        SendBuffer registered = tryAllocate(allocator, capacity);
        ByteBuffer storage = registered != null ? storageOf(registered) : ByteBuffer.allocateDirect(capacity);
        return new RegisteredByteBuf(allocator, owner, registered, storage);
    }

    private static SendBuffer tryAllocate(IntFunction<SendBuffer> allocator, int capacity) {
        try {
            return allocator.apply(capacity);
        } catch (RuntimeException noRegisteredMemory) {
            return null;
        }
    }

    /**
     * The registered memory for Netty: the send buffer's own view, cleared (position 0, limit = capacity, big-endian;
     * the buffer is fresh from the pool, nobody else reads its position). Netty's constructor slices it once more;
     * no duplicate of ours before it (issue 39: two views per packet, one of them ours).
     */
    private static ByteBuffer storageOf(SendBuffer registered) {
        return registered.buffer().clear();
    }

    /** True when this buffer's registered memory belongs to {@code channel}. */
    boolean isOwnedBy(Object channel) {
        return owner == channel;
    }

    @Override
    protected ByteBuffer allocateDirect(int initialCapacity) {
        switching = true;
        pending = tryAllocate(allocator, initialCapacity);
        pendingStorage = pending != null ? storageOf(pending) : super.allocateDirect(initialCapacity);
        return pendingStorage;
    }

    @Override
    protected void freeDirect(ByteBuffer buffer) {
        // registered memory is released in capacity(int) and deallocate(); unregistered memory is left to the GC
    }

    @Override
    public RegisteredByteBuf capacity(int newCapacity) {
        SendBuffer old = current;
        switching = false;
        pending = null;
        pendingStorage = null;
        try {
            super.capacity(newCapacity);
        } catch (RuntimeException | Error e) {
            if (pending != null) {
                pending.release();
            }
            pending = null;
            pendingStorage = null;
            throw e;
        }
        if (switching) { // the storage moved to what allocateDirect produced
            current = pending;
            storage = pendingStorage;
            pending = null;
            pendingStorage = null;
            if (old != null) {
                old.release();
            }
        }
        return this;
    }

    /**
     * Moves the registered memory out of this buffer for sending bytes {@code [0, writerIndex)}: the returned buffer's
     * position is set to {@code writerIndex()}, and this buffer no longer releases it. Null when the frame is not in
     * registered memory, does not start at index 0, or another holder still references this buffer: the caller then
     * sends a copy.
     */
    SendBuffer takeSendBuffer() {
        SendBuffer registered = current;
        if (registered == null || readerIndex() != 0 || refCnt() != 1) {
            return null;
        }
        current = null;
        registered.buffer().clear().position(writerIndex());
        return registered;
    }

    /** As Netty's, with an absolute put into the storage instead of a put through a duplicate of it. */
    @Override
    public RegisteredByteBuf setBytes(int index, byte[] src, int srcIndex, int length) {
        checkSrcIndex(index, length, srcIndex, src.length);
        storage.put(index, src, srcIndex, length);
        return this;
    }

    @Override
    protected void deallocate() {
        super.deallocate();
        SendBuffer registered = current;
        current = null;
        if (registered != null) {
            registered.release();
        }
    }
}
