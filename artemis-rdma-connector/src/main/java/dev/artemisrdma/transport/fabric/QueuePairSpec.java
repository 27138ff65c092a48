package dev.artemisrdma.transport.fabric;

/**
 * What a new queue pair asks for. The device may round the depths up; {@link QueuePair#caps()} tells what it got.
 *
 * @param completionQueue shared by the send and receive side of this queue pair (and possibly by others)
 * @param maxInlineData   0 disables inline sends
 * @param sharedReceiveQueue null: the queue pair has its own receive queue of {@code maxRecvWr}; otherwise it
 *                        consumes receives from this shared one (and takes none of its own: postRecv is refused)
 */
public record QueuePairSpec(CompletionQueue completionQueue, int maxSendWr, int maxRecvWr, int maxSendSge,
                            int maxRecvSge, int maxInlineData, SharedReceiveQueue sharedReceiveQueue) {

    /** A queue pair with its own receive queue. */
    public QueuePairSpec(CompletionQueue completionQueue, int maxSendWr, int maxRecvWr, int maxSendSge,
                         int maxRecvSge, int maxInlineData) {
        this(completionQueue, maxSendWr, maxRecvWr, maxSendSge, maxRecvSge, maxInlineData, null);
    }

    public QueuePairSpec {
        if (completionQueue == null) {
            throw new IllegalArgumentException("a queue pair needs a completion queue");
        }
        if (maxSendWr < 1 || maxRecvWr < 1 || maxSendSge < 1 || maxRecvSge < 1 || maxInlineData < 0) {
            throw new IllegalArgumentException("invalid queue pair spec: " + maxSendWr + "/" + maxRecvWr + "/"
                    + maxSendSge + "/" + maxRecvSge + "/" + maxInlineData);
        }
    }

    /** The same ask with {@code inline} bytes of inline data. */
    public QueuePairSpec withMaxInlineData(int inline) {
        return new QueuePairSpec(completionQueue, maxSendWr, maxRecvWr, maxSendSge, maxRecvSge, inline,
                sharedReceiveQueue);
    }
}
