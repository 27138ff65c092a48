/*
 * Fakes a posted send work request (ibv_send_wr with its scatter-gather list), as copied at post time: the data is
 * read only when the wire executes it (inline data is copied at post). Enforces nothing itself; it is what
 * {@link FakeMr} checks before a deregistration. State: owned by its queue pair's send queue, under the fabric's lock.
 */
package dev.artemisrdma.transport;

import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.SendList;

final class SendWr {
    final long wrId;
    final boolean signaled;
    final long[] sgeAddress;
    final int[] sgeLength;
    final int[] sgeLkey;
    byte[] inlineData;
    long rnrSince;
    /** SEND_WITH_IMM's immediate data as an unsigned value, or Completions.NO_IMMEDIATE for a plain SEND. */
    final long immediate;

    SendWr(SendList list, int i) {
        wrId = list.wrId(i);
        signaled = (list.flags(i) & SendList.FLAG_SIGNALED) != 0;
        immediate = (list.flags(i) & SendList.FLAG_IMMEDIATE) != 0 ? list.immediate(i) & 0xFFFF_FFFFL
                : Completions.NO_IMMEDIATE;
        int n = list.sgeCount(i);
        int first = list.firstSge(i);
        sgeAddress = new long[n];
        sgeLength = new int[n];
        sgeLkey = new int[n];
        for (int s = 0; s < n; s++) {
            sgeAddress[s] = list.sgeAddress(first + s);
            sgeLength[s] = list.sgeLength(first + s);
            sgeLkey[s] = list.sgeLkey(first + s);
        }
    }
}
