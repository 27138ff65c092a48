package dev.artemisrdma.transport.fabric;

/** A reusable list of receive work requests (one scatter-gather entry each), posted in one call. */
public final class RecvList {

    private final long[] wrId;
    private final long[] address;
    private final int[] length;
    private final int[] lkey;
    private int size;

    public RecvList(int maxRequests) {
        wrId = new long[maxRequests];
        address = new long[maxRequests];
        length = new int[maxRequests];
        lkey = new int[maxRequests];
    }

    public RecvList add(long workRequestId, long bufferAddress, int bufferLength, int bufferLkey) {
        if (size == wrId.length) {
            throw new IllegalStateException("receive list full (" + wrId.length + ")");
        }
        wrId[size] = workRequestId;
        address[size] = bufferAddress;
        length[size] = bufferLength;
        lkey[size] = bufferLkey;
        size++;
        return this;
    }

    public void clear() {
        size = 0;
    }

    public int size() {
        return size;
    }

    public boolean isEmpty() {
        return size == 0;
    }

    public int maxRequests() {
        return wrId.length;
    }

    public long wrId(int i) {
        return wrId[i];
    }

    public long address(int i) {
        return address[i];
    }

    public int length(int i) {
        return length[i];
    }

    public int lkey(int i) {
        return lkey[i];
    }
}
