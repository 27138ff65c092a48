package dev.artemisrdma.transport.stats;

/**
 * A snapshot of one channel's counters ({@link ChannelMeasures#stats}), for monitoring, tests and benchmarks.
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
 * @param framesPacked        of the frames sent, how many went packed with others into one SEND
 * @param packedSends         SENDs that carried packed frames (each several, on one credit)
 * @param flushesToLoop       writer flushes left to the completion loop, which was handling a batch and posted
 *                            what had queued after it
 * @param immediateSends      fragments sent with their header in the SEND's immediate data, a whole receive slot of
 *                            payload each (large frames to a peer that reads them)
 */
public record TransportStats(long framesSent, long bytesSent, long framesReceived, long bytesReceived,
                             long creditFramesSent, long creditFramesReceived, long creditStalls,
                             long sendQueueStalls, long sendsPosted, long signaledSends, long inlineSends,
                             long postCalls, long framesPacked, long packedSends, long flushesToLoop,
                             long immediateSends) {

    /** Frames per data SEND (credit frames left out): above 1 when packing, below when fragmenting. */
    public double framesPerDataSend() {
        long dataSends = sendsPosted - creditFramesSent;
        return dataSends == 0 ? 0 : (double) framesSent / dataSends;
    }
}
