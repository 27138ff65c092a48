/*
 * A reusable view of one request of a SendList as {@link Sges}, for a SEND executed inside its post: one per posting
 * queue pair, pointed at each request in turn, so that executing a SEND allocates nothing. Owned by the posting
 * thread (verbs posts to one queue pair one at a time).
 */
package dev.artemisrdma.transport.inmemory;

import dev.artemisrdma.transport.fabric.SendList;

public final class ListSges implements Sges {
    private SendList list;
    private int first;
    private int count;

    /** Points at request {@code i} of {@code list}; returns this. */
    public ListSges of(SendList list, int i) {
        this.list = list;
        this.first = list.firstSge(i);
        this.count = list.sgeCount(i);
        return this;
    }

    @Override
    public int sgeCount() {
        return count;
    }

    @Override
    public long sgeAddress(int s) {
        return list.sgeAddress(first + s);
    }

    @Override
    public int sgeLength(int s) {
        return list.sgeLength(first + s);
    }

    @Override
    public int sgeLkey(int s) {
        return list.sgeLkey(first + s);
    }

    @Override
    public byte[] inlineData() {
        return null; // executed at post time: the entries are read now, inline or not
    }
}
