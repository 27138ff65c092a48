package dev.artemisrdma.transport;

/**
 * A reusable batch of work completions, laid out as parallel arrays so polling allocates nothing.
 * Status and opcode values are the ibv_wc ones ({@link WcStatus} names them).
 */
public final class Completions {

    public static final int OPCODE_SEND = 0;
    public static final int OPCODE_RECV = 128;

    private final long[] wrId;
    private final int[] status;
    private final int[] opcode;
    private final int[] byteLength;
    private final int[] qpNumber;
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

    /** Empties the batch; fabric implementations call this before filling it. */
    public void clear() {
        count = 0;
    }

    /** Appends one completion; for fabric implementations. */
    public void add(long wrId, int status, int opcode, int byteLength, int qpNumber) {
        int i = count++;
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
