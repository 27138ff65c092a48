package dev.artemisrdma.transport;

/**
 * A snapshot of one channel's counters, for tests and benchmarks.
 *
 * @param framesSent          frames fully posted
 * @param bytesSent           payload bytes of those frames
 * @param framesReceived      whole frames delivered to the handler
 * @param bytesReceived       payload bytes of those frames
 * @param creditFramesSent    explicit credit returns (no payload)
 * @param creditFramesReceived explicit credit returns from the peer
 * @param creditStalls        times the send path stopped for want of a credit
 * @param sendQueueStalls     times the send path stopped for want of send queue budget
 * @param sendsPosted         SEND work requests posted (fragments and credit frames)
 * @param signaledSends       of those, how many asked for a completion
 * @param inlineSends         of those, how many went inline
 * @param postCalls           postSend calls (each posts a list)
 */
public record TransportStats(long framesSent, long bytesSent, long framesReceived, long bytesReceived,
                             long creditFramesSent, long creditFramesReceived, long creditStalls,
                             long sendQueueStalls, long sendsPosted, long signaledSends, long inlineSends,
                             long postCalls) {

    /** The counters of a channel made by {@link RdmaTransport}. */
    public static TransportStats of(RdmaChannel channel) {
        if (!(channel instanceof RdmaChannelImpl)) {
            throw new IllegalArgumentException("not a channel of RdmaTransport: " + channel);
        }
        return ((RdmaChannelImpl) channel).stats();
    }
}
