package dev.artemisrdma.artemis;

/**
 * The RDMA transport's counters of one acceptor, over JMX: registered by each started RDMA acceptor in the broker's
 * domain as {@code org.apache.activemq.artemis:broker="BROKER",component=acceptors,name="ACCEPTOR",
 * subcomponent=rdma-transport} and unregistered when it stops. Counters only grow while the acceptor runs; the same
 * values are published as Micrometer meters {@code artemis.rdma.*} (README, "Monitoring").
 */
public interface RdmaTransportMetricsMXBean {

    /** Payload bytes of the frames sent (Core packets, framing excluded). */
    long getBytesSent();

    /** Payload bytes of the whole frames received. */
    long getBytesReceived();

    /** Frames sent: one per Core packet. */
    long getFramesSent();

    /** Whole frames received (after reassembly). */
    long getFramesReceived();

    /** Frames that went packed with others into one SEND (wire feature bit 0; never toward an older peer). */
    long getFramesPacked();

    /**
     * Fragments sent with their header in the SEND's immediate data (wire feature bit 2; never toward an older peer).
     */
    long getImmediateFragmentsSent();

    /**
     * Connections open now whose peer stated fewer wire features than this build: older artemis-rdma builds, each
     * served with the features it stated (docs/protocol.md). 0 once a rolling upgrade has reached every peer.
     */
    int getOlderPeerConnections();

    /** Work completions polled for these connections (sends, receives, flushes). */
    long getCompletions();

    /** Times a send had to wait because the peer granted no receive credit. */
    long getCreditStalls();

    /** Work requests failed with IBV_WC_RNR_RETRY_EXC_ERR (a send found no receive posted). */
    long getRnrRetryErrors();

    /** Work requests failed with IBV_WC_RETRY_EXC_ERR (the peer or the network stopped answering). */
    long getRetryErrors();

    /** Work requests failed with any other status (flushes at disconnect are not errors). */
    long getCompletionErrors();

    /** Peers that broke the wire protocol: a bad handshake or a malformed frame. */
    long getProtocolErrors();

    /** Connections open now. */
    int getConnections();

    /** Connection requests accepted. */
    long getConnectionsAccepted();

    /**
     * Connection requests refused (bad handshake, application refusal, a source limit, no resources, shutting down,
     * and those refused unread because their host had too many waiting already).
     */
    long getConnectionsRefused();

    /** Memory these connections have registered with the RDMA device (receive slots and send headers). */
    long getRegisteredMemoryBytes();

    /** Memory registered by the send buffer pool of the transport these connections use (shared per settings). */
    long getSendPoolBytes();

    /**
     * Memory registered by the shared receive pools of that transport's completion loops (acceptors with
     * sharedReceiveQueue: one pool of sharedReceiveSlots x slotSize per loop that serves accepted connections).
     */
    long getSharedReceivePoolBytes();

    /** Shared receive pools in service in that transport. */
    int getSharedReceivePools();

    /**
     * Receive credits that connections whose window had grown gave back, idle, to a shared receive pool of that
     * transport that needed them (it recalls them when a growth or an admission finds too little spare).
     */
    long getSharedReceiveCreditsRecalled();

    /**
     * Recalls the shared receive pools of that transport made: each asked the connections whose window had grown to
     * give back their surplus. Recalls that keep rising while the credits recalled do not mean busy connections keep
     * their windows: the pools are too small for the load (raise sharedReceiveSlots).
     */
    long getSharedReceiveRecalls();

    // The completion loops of the transport these connections use (shared per settings, like the send pool).

    /** Completion loops (threads) made so far. */
    int getLoops();

    /** Idle periods in which a completion loop busy-polled before blocking. */
    long getLoopSpins();

    /** Of those, how many found a completion while spinning (a wake-up saved). */
    long getLoopSpinHits();

    /** Nanoseconds the loops spent busy-polling while idle. */
    long getLoopSpinNanos();

    /** Times a loop armed its completion channel and blocked. */
    long getLoopBlocks();

    /**
     * Of those, how many a completion ended (the others: the 100 ms timeout while a connection has a deadline
     * running, a close or stop that woke the loop, or the 10 s bound of an idle loop).
     */
    long getLoopWakeUps();

    /** Nanoseconds the loops spent blocked. */
    long getLoopBlockedNanos();

    /** CPU time of the loop threads, in nanoseconds (-1 when the JVM cannot measure thread CPU). */
    long getLoopCpuNanos();

    /**
     * Periods of 100 ms in which the loops used up their spin budget (one core's worth of busy-polling, all loops of
     * the transport together): rising under load means the loops would have spun more, and blocked instead.
     */
    long getLoopSpinBudgetExhausted();
}
