/*
 * How a SEND executes into the peer's receive, the verbs rules of it written once for both in-memory fabrics (the
 * strict one executes on its wire thread, the fast one inside the post): every scatter-gather entry must lie in
 * registered memory under its lkey (else the SEND completes with LOC_PROT_ERR and no receive is consumed); the receive
 * must lie in registered memory (else it completes with LOC_PROT_ERR, the SEND with REM_OP_ERR); the SEND must fit the
 * receive (else LOC_LEN_ERR and, as InfiniBand reports it, REM_INV_REQ_ERR); then the bytes are copied, entry by
 * entry, straight from the send buffers into the receive, and the receive completes with the SEND's length and its
 * immediate data. What happens to the queue pairs and which completions are pushed is the caller's (its completion
 * queues differ); the outcome says which rule applied. Stateless; nothing here allocates but {@link #gather}.
 */
package dev.artemisrdma.transport.inmemory;

import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.SendList;
import dev.artemisrdma.transport.fabric.WcStatus;

public final class Execution {
    /** Copied: the receive completes with SUCCESS and the SEND's length, the SEND (when signaled) with SUCCESS. */
    public static final int DELIVERED = 0;
    /** The receive completes with LOC_PROT_ERR, the SEND with REM_OP_ERR; both queue pairs go to error. */
    public static final int RECEIVE_UNREGISTERED = 1;
    /** The receive completes with LOC_LEN_ERR, the SEND with REM_INV_REQ_ERR; both queue pairs go to error. */
    public static final int TOO_LONG = 2;

    private Execution() {
    }

    /** A SEND's immediate data as its completion carries it: unsigned, or NO_IMMEDIATE for a plain SEND. */
    public static long immediate(int flags, int value) {
        return (flags & SendList.FLAG_IMMEDIATE) != 0 ? value & 0xFFFF_FFFFL : Completions.NO_IMMEDIATE;
    }

    /**
     * The bytes {@code send} carries, every entry checked against {@code memory} (unless its data was copied at post);
     * {@code -1 - s} when entry {@code s} lies outside registered memory (the SEND completes with LOC_PROT_ERR, no
     * receive is consumed).
     */
    public static long length(Sges send, Registry<?> memory) {
        byte[] inline = send.inlineData();
        if (inline != null) {
            return inline.length;
        }
        long total = 0;
        for (int s = 0; s < send.sgeCount(); s++) {
            if (memory.resolve(send.sgeAddress(s), send.sgeLength(s), send.sgeLkey(s)) == null) {
                return -1 - s;
            }
            total += send.sgeLength(s);
        }
        return total;
    }

    /**
     * Executes {@code send} of {@code length} bytes (checked by {@link #length}) into the receive {@code r}, taken
     * from the peer's receive queue: one of {@link #DELIVERED}, {@link #RECEIVE_UNREGISTERED}, {@link #TOO_LONG}.
     */
    public static int deliver(Sges send, long length, Registry<?> memory, Recv r) {
        Region into = memory.resolve(r.address, r.length, r.lkey);
        if (into == null) {
            return RECEIVE_UNREGISTERED;
        }
        if (length > r.length) {
            return TOO_LONG;
        }
        long at = r.address;
        byte[] inline = send.inlineData();
        if (inline != null) {
            into.copyFrom(at, inline);
            return DELIVERED;
        }
        for (int s = 0; s < send.sgeCount(); s++) {
            int n = send.sgeLength(s);
            long from = send.sgeAddress(s);
            into.copyFrom(at, memory.resolve(from, n, send.sgeLkey(s)), from, n);
            at += n;
        }
        return DELIVERED;
    }

    /** The receive's completion status for an outcome of {@link #deliver}. */
    public static int receiveStatus(int outcome) {
        return switch (outcome) {
            case DELIVERED -> WcStatus.SUCCESS;
            case RECEIVE_UNREGISTERED -> WcStatus.LOC_PROT_ERR;
            default -> WcStatus.LOC_LEN_ERR;
        };
    }

    /** The SEND's completion status for an outcome of {@link #deliver}. */
    public static int sendStatus(int outcome) {
        return switch (outcome) {
            case DELIVERED -> WcStatus.SUCCESS;
            case RECEIVE_UNREGISTERED -> WcStatus.REM_OP_ERR;
            default -> WcStatus.REM_INV_REQ_ERR;
        };
    }

    /** {@code send}'s bytes copied out now (an inline SEND at post time); null when an entry is not registered. */
    static byte[] gather(Sges send, Registry<?> memory) {
        long total = length(send, memory);
        if (total < 0) {
            return null;
        }
        byte[] data = new byte[(int) total];
        int at = 0;
        for (int s = 0; s < send.sgeCount(); s++) {
            long from = send.sgeAddress(s);
            int n = send.sgeLength(s);
            memory.resolve(from, n, send.sgeLkey(s)).copyTo(from, data, at, n);
            at += n;
        }
        return data;
    }
}
