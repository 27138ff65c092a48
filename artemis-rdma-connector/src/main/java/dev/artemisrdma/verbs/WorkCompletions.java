package dev.artemisrdma.verbs;

import java.nio.ByteBuffer;

/** A native array of struct ibv_wc that ibv_poll_cq fills, read through a ByteBuffer view. */
public final class WorkCompletions implements AutoCloseable {

    public static final int OPCODE_SEND = 0;
    public static final int OPCODE_RECV = 128;
    /** wc_flags: the SEND carried immediate data. */
    public static final int IBV_WC_WITH_IMM = 1 << 1;

    private final NativeStruct array;
    private final ByteBuffer view;
    private final int capacity;
    private int count;

    public WorkCompletions(int capacity) {
        if (capacity < 1) {
            throw new IllegalArgumentException("capacity must be positive");
        }
        this.capacity = capacity;
        this.array = new NativeStruct((long) capacity * Abi.WC_SIZE);
        this.view = array.view();
    }

    long address() {
        return array.address();
    }

    public int capacity() {
        return capacity;
    }

    void setCount(int count) {
        this.count = count;
    }

    public int count() {
        return count;
    }

    public long wrId(int i) {
        return view.getLong(offset(i) + Abi.WC_WR_ID);
    }

    public int status(int i) {
        return view.getInt(offset(i) + Abi.WC_STATUS);
    }

    public int opcode(int i) {
        return view.getInt(offset(i) + Abi.WC_OPCODE);
    }

    public int byteLength(int i) {
        return view.getInt(offset(i) + Abi.WC_BYTE_LEN);
    }

    public int wcFlags(int i) {
        return view.getInt(offset(i) + Abi.WC_WC_FLAGS);
    }

    /** The immediate data in host order; meaningful only when {@link #wcFlags} has {@link #IBV_WC_WITH_IMM}. */
    public int immediate(int i) {
        return SendRequests.toNetworkOrder(view.getInt(offset(i) + Abi.WC_IMM_DATA)); // the swap is its own inverse
    }

    public int qpNumber(int i) {
        return view.getInt(offset(i) + Abi.WC_QP_NUM);
    }

    public int vendorError(int i) {
        return view.getInt(offset(i) + Abi.WC_VENDOR_ERR);
    }

    private int offset(int i) {
        if (i < 0 || i >= count) {
            throw new IndexOutOfBoundsException(i + " of " + count);
        }
        return i * Abi.WC_SIZE;
    }

    @Override
    public void close() {
        array.close();
    }
}
