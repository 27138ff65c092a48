package dev.artemisrdma.transport;

/**
 * What monitoring reads of one channel: its frame counters, its completion counters, the memory it holds. The
 * statistics classes ({@link TransportStats#of}, {@link ChannelCounters#of}, {@link ChannelGroupStats}) read channels
 * through this, not through the channel class, and anything that is not one (a test stand-in) is simply not measured.
 * Any thread; every value is read without the channel's lock or with it briefly.
 */
interface ChannelMeasures {

    TransportStats stats();

    ChannelCounters counters();

    /** Bytes the channel has registered itself (receive slots and send headers); 0 before bind and after release. */
    long registeredBytes();

    /** The shared receive pool the channel holds credits in, or null: counted once per pool by group totals. */
    SharedReceivePool sharedPool();
}
