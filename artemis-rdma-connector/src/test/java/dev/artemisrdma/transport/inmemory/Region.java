/*
 * One registered memory region of an in-memory fabric (ibv_mr): a direct buffer at a synthetic address with its own
 * lkey, made by {@link Registry}. Its job: the bytes behind an address range, so that a SEND's scatter-gather entries
 * and a receive resolve to memory exactly as a NIC's memory translation resolves them. Immutable but for what a
 * subclass adds (the strict fabric's deregistration checks); its bytes are written by whoever executes a SEND into it
 * and read by the transport after it polled the completion.
 */
package dev.artemisrdma.transport.inmemory;

import java.nio.ByteBuffer;

import dev.artemisrdma.transport.fabric.RegisteredMemory;

public abstract class Region implements RegisteredMemory {
    private final int lkey;
    private final long address;
    private final int length;
    /** Absolute reads and writes only: shared by every thread that copies into or out of this region. */
    private final ByteBuffer bytes;

    protected Region(Registry.Slot slot) {
        this.lkey = slot.lkey();
        this.address = slot.address();
        this.length = slot.length();
        this.bytes = slot.bytes();
    }

    @Override
    public final ByteBuffer buffer() {
        return bytes.duplicate().clear();
    }

    @Override
    public final long address() {
        return address;
    }

    @Override
    public final int lkey() {
        return lkey;
    }

    @Override
    public final int length() {
        return length;
    }

    /** Whether {@code [at, at + n)} lies inside this region. */
    public final boolean contains(long at, int n) {
        return n >= 0 && at >= address && at + n <= address + length;
    }

    /** Copies {@code n} bytes at {@code from} in {@code source} to {@code at} in this region (both checked before). */
    final void copyFrom(long at, Region source, long from, int n) {
        bytes.put((int) (at - address), source.bytes, (int) (from - source.address), n);
    }

    /** Copies {@code data} to {@code at} in this region (checked before). */
    final void copyFrom(long at, byte[] data) {
        bytes.put((int) (at - address), data);
    }

    /** Copies {@code n} bytes at {@code from} into {@code into} at {@code offset} (checked before). */
    final void copyTo(long from, byte[] into, int offset, int n) {
        bytes.get((int) (from - address), into, offset, n);
    }
}
