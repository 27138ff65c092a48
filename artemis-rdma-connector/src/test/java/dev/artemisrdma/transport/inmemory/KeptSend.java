/*
 * A posted SEND kept until it executes (ibv_send_wr with its scatter-gather list, copied at post time): the strict
 * fabric's send queue entries, and the fast fabric's SENDs that wait for a receive. Its data is read when it executes,
 * as a NIC reads it by DMA; an inline SEND's data is copied here at post time, as the caller may reuse its buffer
 * once the post returns. Owned by the queue that holds it, under that queue's lock.
 */
package dev.artemisrdma.transport.inmemory;

import dev.artemisrdma.transport.fabric.SendList;

public final class KeptSend implements Sges {
    public final long wrId;
    public final boolean signaled;
    /** SEND_WITH_IMM's immediate data as an unsigned value, or Completions.NO_IMMEDIATE for a plain SEND. */
    public final long immediate;
    private final long[] address;
    private final int[] length;
    private final int[] lkey;
    private final byte[] inline;
    private final boolean inlineUnreadable;
    /** When this SEND, at the head of its queue, first found the peer without a receive (0: not yet). */
    public long rnrSince;

    public KeptSend(SendList list, int i, Registry<?> memory) {
        wrId = list.wrId(i);
        int flags = list.flags(i);
        signaled = (flags & SendList.FLAG_SIGNALED) != 0;
        immediate = Execution.immediate(flags, list.immediate(i));
        int n = list.sgeCount(i);
        int first = list.firstSge(i);
        address = new long[n];
        length = new int[n];
        lkey = new int[n];
        for (int s = 0; s < n; s++) {
            address[s] = list.sgeAddress(first + s);
            length[s] = list.sgeLength(first + s);
            lkey[s] = list.sgeLkey(first + s);
        }
        if ((flags & SendList.FLAG_INLINE) != 0) {
            inline = Execution.gather(this, memory);
            inlineUnreadable = inline == null;
        } else {
            inline = null;
            inlineUnreadable = false;
        }
    }

    /** An inline SEND whose entries were not all in registered memory when it was posted (LOC_PROT_ERR). */
    public boolean inlineUnreadable() {
        return inlineUnreadable;
    }

    /** Whether this SEND will still read registered memory under {@code key} when it executes. */
    public boolean readsFrom(int key) {
        if (inline != null) {
            return false;
        }
        for (int k : lkey) {
            if (k == key) {
                return true;
            }
        }
        return false;
    }

    @Override
    public int sgeCount() {
        return address.length;
    }

    @Override
    public long sgeAddress(int s) {
        return address[s];
    }

    @Override
    public int sgeLength(int s) {
        return length[s];
    }

    @Override
    public int sgeLkey(int s) {
        return lkey[s];
    }

    @Override
    public byte[] inlineData() {
        return inline;
    }
}
