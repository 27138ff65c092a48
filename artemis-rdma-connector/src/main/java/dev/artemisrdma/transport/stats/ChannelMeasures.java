package dev.artemisrdma.transport.stats;

/**
 * What monitoring reads of one channel: its frame counters, its completion counters, the memory it holds. Every
 * channel is one ({@code RdmaChannel} extends this), so {@link ChannelGroupStats}, the broker's meters and the tests
 * read statistics through this interface and never need the channel class. Any thread; every value is read without
 * the channel's lock (a scrape never waits for the data path): the counters are published with release stores
 * ({@link PublishedCounters}), the memory and the shared pool where they change.
 */
public interface ChannelMeasures {

    /** A snapshot of the channel's frame and send counters. */
    TransportStats stats();

    /** The channel's completion and error counters, live. */
    ChannelCounters counters();

    /** Bytes the channel has registered itself (receive slots and send headers); 0 before bind and after release. */
    long registeredBytes();

    /**
     * Whether the peer's handshake stated fewer wire features than this build knows: an older artemis-rdma, served
     * with only the features it stated (false until the handshake is known). Operators count these connections to
     * see a rolling upgrade through.
     */
    boolean olderPeer();

    /** The shared receive pool the channel holds credits in, or null: counted once per pool by group totals. */
    SharedPool sharedPool();

    /** Registered memory that several channels share: group totals count it once, by identity. */
    interface SharedPool {

        long registeredBytes();
    }
}
