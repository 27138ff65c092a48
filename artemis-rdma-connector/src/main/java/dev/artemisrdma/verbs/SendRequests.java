package dev.artemisrdma.verbs;

import java.nio.ByteBuffer;

/**
 * A reusable native list of SEND work requests (struct ibv_send_wr, 128 bytes each, chained by {@code next}) with
 * their scatter-gather arrays, posted by one {@link IbvQueuePair#postSend} call. This is rdma_post_sendv(3)
 * generalised to lists: each request carries a {@code wr_id} that comes back in its work completion.
 *
 * <p>The struct memory only has to live during the post call (the provider copies work requests into its queue);
 * the buffers the scatter-gather entries name must stay registered and untouched until the completion.
 *
 * <p>Threads: not thread-safe; one per queue pair, whose owner (the transport's queue pair) fills and posts it only
 * inside its post lock ({@code PostGate}) and closes it there too, after destroying the queue pair.
 */
public final class SendRequests implements AutoCloseable {

    public static final int IBV_SEND_FENCE = 1;
    public static final int IBV_SEND_SIGNALED = 2;
    public static final int IBV_SEND_SOLICITED = 4;
    public static final int IBV_SEND_INLINE = 8;
    private static final int IBV_WR_SEND = 2;
    private static final int IBV_WR_SEND_WITH_IMM = 3;

    private final int maxRequests;
    private final int maxSgePerRequest;
    private final NativeStruct requests;
    private final NativeStruct sges;
    private final ByteBuffer wr;
    private final ByteBuffer sge;
    private final int[] sgeCounts;
    private final long[] byteLengths;
    private int count;

    public SendRequests(int maxRequests, int maxSgePerRequest) {
        if (maxRequests < 1 || maxSgePerRequest < 1) {
            throw new IllegalArgumentException("need at least one request and one sge");
        }
        this.maxRequests = maxRequests;
        this.maxSgePerRequest = maxSgePerRequest;
        this.requests = new NativeStruct((long) maxRequests * Abi.SEND_WR_SIZE);
        this.sges = new NativeStruct((long) maxRequests * maxSgePerRequest * Abi.SGE_SIZE);
        this.wr = requests.view();
        this.sge = sges.view();
        this.sgeCounts = new int[maxRequests];
        this.byteLengths = new long[maxRequests];
    }

    public int maxRequests() {
        return maxRequests;
    }

    public int maxSgePerRequest() {
        return maxSgePerRequest;
    }

    public int size() {
        return count;
    }

    public void clear() {
        count = 0;
    }

    /** Starts a SEND with the given context ({@code wr_id}) and IBV_SEND_* flags. */
    public SendRequests add(long wrId, int sendFlags) {
        if (count == maxRequests) {
            throw new IllegalStateException("send request list is full (" + maxRequests + ")");
        }
        int i = count++;
        int base = i * Abi.SEND_WR_SIZE;
        wr.putLong(base + Abi.SEND_WR_WR_ID, wrId);
        wr.putLong(base + Abi.SEND_WR_SG_LIST, sges.address((long) i * maxSgePerRequest * Abi.SGE_SIZE));
        wr.putInt(base + Abi.SEND_WR_NUM_SGE, 0);
        wr.putInt(base + Abi.SEND_WR_OPCODE, IBV_WR_SEND);
        wr.putInt(base + Abi.SEND_WR_SEND_FLAGS, sendFlags);
        sgeCounts[i] = 0;
        byteLengths[i] = 0;
        return this;
    }

    /**
     * Starts a SEND with immediate data (IBV_WR_SEND_WITH_IMM): {@code immediate} reaches the peer in its receive
     * completion, in network byte order on the wire as the verbs ABI wants it.
     */
    public SendRequests addWithImmediate(long wrId, int sendFlags, int immediate) {
        add(wrId, sendFlags);
        int base = (count - 1) * Abi.SEND_WR_SIZE;
        wr.putInt(base + Abi.SEND_WR_OPCODE, IBV_WR_SEND_WITH_IMM);
        wr.putInt(base + Abi.SEND_WR_IMM_DATA, toNetworkOrder(immediate));
        return this;
    }

    /** The view is in host order; imm_data is a __be32. */
    static int toNetworkOrder(int value) {
        return java.nio.ByteOrder.nativeOrder() == java.nio.ByteOrder.BIG_ENDIAN ? value : Integer.reverseBytes(value);
    }

    /** Appends a scatter-gather entry to the last SEND. */
    public SendRequests addSge(long address, int length, int lkey) {
        if (count == 0) {
            throw new IllegalStateException("add a request before its scatter-gather entries");
        }
        int i = count - 1;
        int n = sgeCounts[i];
        if (n == maxSgePerRequest) {
            throw new IllegalStateException("a request holds at most " + maxSgePerRequest + " scatter-gather entries");
        }
        if (address == 0 || length < 0) {
            throw new IllegalArgumentException("invalid scatter-gather entry: address " + address + ", length "
                    + length);
        }
        int base = (i * maxSgePerRequest + n) * Abi.SGE_SIZE;
        sge.putLong(base + Abi.SGE_ADDR, address);
        sge.putInt(base + Abi.SGE_LENGTH, length);
        sge.putInt(base + Abi.SGE_LKEY, lkey);
        sgeCounts[i] = n + 1;
        byteLengths[i] += length;
        wr.putInt(i * Abi.SEND_WR_SIZE + Abi.SEND_WR_NUM_SGE, n + 1);
        return this;
    }

    int sgeCount(int i) {
        return sgeCounts[i];
    }

    long byteLength(int i) {
        return byteLengths[i];
    }

    int opcode(int i) {
        return wr.getInt(i * Abi.SEND_WR_SIZE + Abi.SEND_WR_OPCODE);
    }

    int flags(int i) {
        return wr.getInt(i * Abi.SEND_WR_SIZE + Abi.SEND_WR_SEND_FLAGS);
    }

    long wrId(int i) {
        return wr.getLong(i * Abi.SEND_WR_SIZE + Abi.SEND_WR_WR_ID);
    }

    /** Chains the requests by {@code next} (the last one ends the list) and returns the head's address. */
    long link() {
        for (int i = 0; i < count; i++) {
            long next = i + 1 < count ? requests.address((long) (i + 1) * Abi.SEND_WR_SIZE) : 0L;
            wr.putLong(i * Abi.SEND_WR_SIZE + Abi.SEND_WR_NEXT, next);
        }
        return requests.address();
    }

    /** Index of the request at native address {@code wrAddress} (from bad_wr), or -1. */
    int indexOf(long wrAddress) {
        long offset = wrAddress - requests.address();
        return offset >= 0 && offset < (long) count * Abi.SEND_WR_SIZE ? (int) (offset / Abi.SEND_WR_SIZE) : -1;
    }

    @Override
    public void close() {
        requests.close();
        sges.close();
    }
}
