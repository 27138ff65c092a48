package dev.artemisrdma.transport.loop;

import java.util.Arrays;

/**
 * Channels by queue pair number, for a completion loop whose shared receive completions name no channel. Reads are
 * the loop thread's, one per receive completion, and allocate nothing (a map keyed by Integer would box each number);
 * writes (a queue pair created or destroyed) are rare and copy the table, so a reader never sees a half-made one.
 */
final class QueuePairTable {

    /** An immutable open-addressing table; key 0 is empty (0 is never an RC queue pair number). */
    private record Table(int[] keys, LoopChannel[] values, int size) {
    }

    private volatile Table table = new Table(new int[16], new LoopChannel[16], 0);

    LoopChannel get(int qpNumber) {
        Table t = table;
        int mask = t.keys.length - 1;
        for (int i = mix(qpNumber) & mask; ; i = (i + 1) & mask) {
            int k = t.keys[i];
            if (k == qpNumber && k != 0) {
                return t.values[i];
            }
            if (k == 0) {
                return null;
            }
        }
    }

    synchronized void put(int qpNumber, LoopChannel channel) {
        if (qpNumber == 0) {
            throw new IllegalArgumentException("queue pair number 0");
        }
        rebuild(qpNumber, channel, null);
    }

    /** Removes {@code qpNumber} if it still maps to {@code channel}. */
    synchronized void remove(int qpNumber, LoopChannel channel) {
        if (get(qpNumber) == channel && channel != null) {
            rebuild(qpNumber, null, channel);
        }
    }

    synchronized int size() {
        return table.size;
    }

    private void rebuild(int key, LoopChannel add, LoopChannel drop) {
        Table old = table;
        int entries = old.size + (add != null ? 1 : 0);
        int capacity = 16;
        while (capacity < entries * 2) {
            capacity <<= 1;
        }
        int[] keys = new int[capacity];
        LoopChannel[] values = new LoopChannel[capacity];
        int size = 0;
        for (int i = 0; i < old.keys.length; i++) {
            int k = old.keys[i];
            if (k != 0 && k != key) {
                size += insert(keys, values, k, old.values[i]);
            }
        }
        if (add != null) {
            size += insert(keys, values, key, add);
        }
        table = new Table(keys, values, size);
    }

    private static int insert(int[] keys, LoopChannel[] values, int key, LoopChannel value) {
        int mask = keys.length - 1;
        int i = mix(key) & mask;
        while (keys[i] != 0) {
            i = (i + 1) & mask;
        }
        keys[i] = key;
        values[i] = value;
        return 1;
    }

    private static int mix(int key) {
        int h = key * 0x9E3779B9;
        return h ^ (h >>> 16);
    }

    @Override
    public String toString() {
        return "QueuePairTable" + Arrays.toString(table.keys);
    }
}
