package dev.artemisrdma.verbs;

import com.sun.jna.Memory;
import com.sun.jna.Pointer;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Zeroed native memory for C structs, with a native-order {@link ByteBuffer} view for fast field access
 * (cheaper than per-field Pointer calls) and deterministic release. The owner keeps it strongly reachable for as
 * long as native code may read it.
 */
final class NativeStruct implements AutoCloseable {

    private final Memory memory;
    private final long address;
    private final ByteBuffer view;

    NativeStruct(long size) {
        memory = new Memory(size);
        memory.clear();
        address = Pointer.nativeValue(memory);
        view = memory.getByteBuffer(0, size).order(ByteOrder.nativeOrder());
    }

    long address() {
        return address;
    }

    long address(long offset) {
        return address + offset;
    }

    ByteBuffer view() {
        return view;
    }

    long getLong(int offset) {
        return view.getLong(offset);
    }

    int getInt(int offset) {
        return view.getInt(offset);
    }

    void putLong(int offset, long value) {
        view.putLong(offset, value);
    }

    void putInt(int offset, int value) {
        view.putInt(offset, value);
    }

    void putByte(int offset, int value) {
        view.put(offset, (byte) value);
    }

    void clear() {
        memory.clear();
    }

    @Override
    public void close() {
        memory.close();
    }

    /** Reads a pointer-sized value at an arbitrary native address (set-up path only). */
    static long readPointer(long address, long offset) {
        requireNonNull(address, "struct");
        return new Pointer(address).getLong(offset);
    }

    static int readInt(long address, long offset) {
        requireNonNull(address, "struct");
        return new Pointer(address).getInt(offset);
    }

    static String readString(long address) {
        return address == 0 ? null : new Pointer(address).getString(0);
    }

    static void requireNonNull(long address, String what) {
        if (address == 0) {
            throw new IllegalStateException("null " + what + " pointer");
        }
    }
}
