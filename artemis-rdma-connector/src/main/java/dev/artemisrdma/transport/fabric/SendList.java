package dev.artemisrdma.transport.fabric;

/**
 * A reusable list of SEND work requests, each with its own scatter-gather list, posted in one call.
 * Held in plain arrays so that building it allocates nothing; the fabric turns it into native work requests.
 */
public final class SendList {

    public static final int FLAG_SIGNALED = 1;
    public static final int FLAG_INLINE = 2;
    /** The SEND carries 32 bits of immediate data ({@link #immediate(int)}): SEND_WITH_IMM. */
    public static final int FLAG_IMMEDIATE = 4;

    private final long[] wrId;
    private final int[] flags;
    private final int[] immediate;
    private final int[] firstSge;
    private final int[] sgeCount;
    private final long[] sgeAddress;
    private final int[] sgeLength;
    private final int[] sgeLkey;
    private int requests;
    private int sges;

    public SendList(int maxRequests, int maxSgesInAll) {
        wrId = new long[maxRequests];
        flags = new int[maxRequests];
        immediate = new int[maxRequests];
        firstSge = new int[maxRequests];
        sgeCount = new int[maxRequests];
        sgeAddress = new long[maxSgesInAll];
        sgeLength = new int[maxSgesInAll];
        sgeLkey = new int[maxSgesInAll];
    }

    /** Starts a new SEND; its scatter-gather entries follow with {@link #addSge}. */
    public SendList addSend(long workRequestId, int sendFlags) {
        if (requests == wrId.length) {
            throw new IllegalStateException("send list full (" + wrId.length + " work requests)");
        }
        wrId[requests] = workRequestId;
        flags[requests] = sendFlags;
        firstSge[requests] = sges;
        sgeCount[requests] = 0;
        requests++;
        return this;
    }

    public SendList addSge(long address, int length, int lkey) {
        if (requests == 0) {
            throw new IllegalStateException("addSend before addSge");
        }
        if (sges == sgeAddress.length) {
            throw new IllegalStateException("send list full (" + sgeAddress.length + " scatter-gather entries)");
        }
        sgeAddress[sges] = address;
        sgeLength[sges] = length;
        sgeLkey[sges] = lkey;
        sges++;
        sgeCount[requests - 1]++;
        return this;
    }

    /** Makes the last request a SEND with immediate data: {@code value} arrives in the peer's receive completion. */
    public SendList withImmediate(int value) {
        if (requests == 0) {
            throw new IllegalStateException("no request to give immediate data");
        }
        flags[requests - 1] |= FLAG_IMMEDIATE;
        immediate[requests - 1] = value;
        return this;
    }

    /** Asks a completion of the last request added (it becomes signaled). */
    public void signalLast() {
        if (requests == 0) {
            throw new IllegalStateException("no request to signal");
        }
        flags[requests - 1] |= FLAG_SIGNALED;
    }

    public void clear() {
        requests = 0;
        sges = 0;
    }

    public int size() {
        return requests;
    }

    public boolean isEmpty() {
        return requests == 0;
    }

    public int maxRequests() {
        return wrId.length;
    }

    public long wrId(int request) {
        return wrId[request];
    }

    public int flags(int request) {
        return flags[request];
    }

    /** The immediate data of a request with {@link #FLAG_IMMEDIATE}. */
    public int immediate(int request) {
        return immediate[request];
    }

    public int sgeCount(int request) {
        return sgeCount[request];
    }

    /** Index into the sge arrays of the first entry of {@code request}. */
    public int firstSge(int request) {
        return firstSge[request];
    }

    public long sgeAddress(int sge) {
        return sgeAddress[sge];
    }

    public int sgeLength(int sge) {
        return sgeLength[sge];
    }

    public int sgeLkey(int sge) {
        return sgeLkey[sge];
    }

    /** Total bytes of one request's scatter-gather list. */
    public long byteLength(int request) {
        long total = 0;
        for (int s = firstSge[request], end = s + sgeCount[request]; s < end; s++) {
            total += sgeLength[s];
        }
        return total;
    }
}
