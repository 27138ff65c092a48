/*
 * Posted receives in order (a queue pair's receive queue or a shared receive queue): a ring of parallel arrays, so
 * that posting and taking one allocates nothing (it grows, doubling, only past its largest depth so far; the depth
 * rules are the caller's, see VerbsRules). Not thread-safe: its owner guards it (the strict fabric's lock, the fast
 * fabric's monitor on the ring).
 */
package dev.artemisrdma.transport.inmemory;

import dev.artemisrdma.transport.fabric.RecvList;

public final class RecvRing {
    private long[] wrId;
    private long[] address;
    private int[] length;
    private int[] lkey;
    private int head;
    private int size;

    public RecvRing(int capacity) {
        int c = Integer.highestOneBit(Math.max(2, capacity) - 1) << 1;
        wrId = new long[c];
        address = new long[c];
        length = new int[c];
        lkey = new int[c];
    }

    public int size() {
        return size;
    }

    public boolean isEmpty() {
        return size == 0;
    }

    /** Adds request {@code i} of {@code list} at the tail. */
    public void add(RecvList list, int i) {
        if (size == wrId.length) {
            grow();
        }
        int at = (head + size++) & (wrId.length - 1);
        wrId[at] = list.wrId(i);
        address[at] = list.address(i);
        length[at] = list.length(i);
        lkey[at] = list.lkey(i);
    }

    /** Takes the oldest into {@code out}; false when empty. */
    public boolean take(Recv out) {
        if (size == 0) {
            return false;
        }
        out.wrId = wrId[head];
        out.address = address[head];
        out.length = length[head];
        out.lkey = lkey[head];
        head = (head + 1) & (wrId.length - 1);
        size--;
        return true;
    }

    /** The work request id of the {@code k}-th oldest. */
    public long wrIdAt(int k) {
        return wrId[(head + k) & (wrId.length - 1)];
    }

    /** The lkey of the {@code k}-th oldest. */
    public int lkeyAt(int k) {
        return lkey[(head + k) & (wrId.length - 1)];
    }

    public void clear() {
        head = 0;
        size = 0;
    }

    private void grow() {
        int n = wrId.length;
        long[] w = new long[2 * n];
        long[] a = new long[2 * n];
        int[] l = new int[2 * n];
        int[] k = new int[2 * n];
        for (int i = 0; i < size; i++) {
            int from = (head + i) & (n - 1);
            w[i] = wrId[from];
            a[i] = address[from];
            l[i] = length[from];
            k[i] = lkey[from];
        }
        wrId = w;
        address = a;
        length = l;
        lkey = k;
        head = 0;
    }
}
