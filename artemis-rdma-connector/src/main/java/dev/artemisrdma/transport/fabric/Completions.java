package dev.artemisrdma.transport.fabric;

/**
 * A reusable batch of work completions, laid out as parallel arrays so polling allocates nothing.
 * Status and opcode values are the ibv_wc ones ({@link WcStatus} names them).
 */
public final class Completions {

    public static final int OPCODE_SEND = 0;
    public static final int OPCODE_RECV = 128;
    /** What {@link #immediate(int)} says for a completion without immediate data. */
    public static final long NO_IMMEDIATE = -1L;

    private final long[] wrId;
    private final int[] status;
    private final int[] opcode;
    private final int[] byteLength;
    private final int[] qpNumber;
    /** A receive's immediate data as an unsigned 32-bit value, or {@link #NO_IMMEDIATE}. */
    private final long[] immediate;
    private int count;

    public Completions(int capacity) {
        if (capacity < 1) {
            throw new IllegalArgumentException("capacity must be positive");
        }
        wrId = new long[capacity];
        status = new int[capacity];
        opcode = new int[capacity];
        byteLength = new int[capacity];
        qpNumber = new int[capacity];
        immediate = new long[capacity];
    }

    public int capacity() {
        return wrId.length;
    }

    public int count() {
        return count;
    }

    public long wrId(int i) {
        return wrId[check(i)];
    }

    public int status(int i) {
        return status[check(i)];
    }

    public boolean isSuccess(int i) {
        return status[check(i)] == WcStatus.SUCCESS;
    }

    public int opcode(int i) {
        return opcode[check(i)];
    }

    public boolean isReceive(int i) {
        return (opcode[check(i)] & OPCODE_RECV) != 0;
    }

    public int byteLength(int i) {
        return byteLength[check(i)];
    }

    public int qpNumber(int i) {
        return qpNumber[check(i)];
    }

    /**
     * The immediate data of a receive whose SEND carried some (IBV_WC_WITH_IMM), as an unsigned 32-bit value in host
     * order; {@link #NO_IMMEDIATE} otherwise.
     */
    public long immediate(int i) {
        return immediate[check(i)];
    }

    /** Empties the batch; fabric implementations call this before filling it. */
    public void clear() {
        count = 0;
    }

    /** Appends one completion; for fabric implementations. */
    public void add(long wrId, int status, int opcode, int byteLength, int qpNumber) {
        add(wrId, status, opcode, byteLength, qpNumber, NO_IMMEDIATE);
    }

    /** Appends one completion with its immediate data ({@link #NO_IMMEDIATE} for none); for fabric implementations. */
    public void add(long wrId, int status, int opcode, int byteLength, int qpNumber, long immediate) {
        int i = count++;
        this.immediate[i] = immediate;
        this.wrId[i] = wrId;
        this.status[i] = status;
        this.opcode[i] = opcode;
        this.byteLength[i] = byteLength;
        this.qpNumber[i] = qpNumber;
    }

    private int check(int i) {
        if (i < 0 || i >= count) {
            throw new IndexOutOfBoundsException(i + " of " + count);
        }
        return i;
    }
}
