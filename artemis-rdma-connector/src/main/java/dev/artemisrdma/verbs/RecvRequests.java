package dev.artemisrdma.verbs;

import java.nio.ByteBuffer;

/**
 * A reusable native list of receive work requests (struct ibv_recv_wr), each with one scatter-gather entry,
 * posted by one {@link IbvQueuePair#postRecv} call: rdma_post_recvv(3) for batches.
 */
public final class RecvRequests implements AutoCloseable {

    private final int maxRequests;
    private final NativeStruct requests;
    private final NativeStruct sges;
    private final ByteBuffer wr;
    private final ByteBuffer sge;
    private int count;

    public RecvRequests(int maxRequests) {
        if (maxRequests < 1) {
            throw new IllegalArgumentException("need at least one request");
        }
        this.maxRequests = maxRequests;
        this.requests = new NativeStruct((long) maxRequests * Abi.RECV_WR_SIZE);
        this.sges = new NativeStruct((long) maxRequests * Abi.SGE_SIZE);
        this.wr = requests.view();
        this.sge = sges.view();
    }

    public int maxRequests() {
        return maxRequests;
    }

    public int size() {
        return count;
    }

    public void clear() {
        count = 0;
    }

    public RecvRequests add(long wrId, long address, int length, int lkey) {
        if (count == maxRequests) {
            throw new IllegalStateException("receive request list is full (" + maxRequests + ")");
        }
        if (address == 0 || length <= 0) {
            throw new IllegalArgumentException("invalid receive buffer: address " + address + ", length " + length);
        }
        int i = count++;
        int base = i * Abi.RECV_WR_SIZE;
        int sgeBase = i * Abi.SGE_SIZE;
        sge.putLong(sgeBase + Abi.SGE_ADDR, address);
        sge.putInt(sgeBase + Abi.SGE_LENGTH, length);
        sge.putInt(sgeBase + Abi.SGE_LKEY, lkey);
        wr.putLong(base + Abi.RECV_WR_WR_ID, wrId);
        wr.putLong(base + Abi.RECV_WR_SG_LIST, sges.address(sgeBase));
        wr.putInt(base + Abi.RECV_WR_NUM_SGE, 1);
        return this;
    }

    long link() {
        for (int i = 0; i < count; i++) {
            long next = i + 1 < count ? requests.address((long) (i + 1) * Abi.RECV_WR_SIZE) : 0L;
            wr.putLong(i * Abi.RECV_WR_SIZE + Abi.RECV_WR_NEXT, next);
        }
        return requests.address();
    }

    int indexOf(long wrAddress) {
        long offset = wrAddress - requests.address();
        return offset >= 0 && offset < (long) count * Abi.RECV_WR_SIZE ? (int) (offset / Abi.RECV_WR_SIZE) : -1;
    }

    @Override
    public void close() {
        requests.close();
        sges.close();
    }
}
