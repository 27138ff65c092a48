package dev.artemisrdma.transport.config;

import java.time.Duration;
import java.time.format.DateTimeParseException;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import dev.artemisrdma.transport.fabric.Addressing;

/**
 * Settings of the RDMA transport. Every value is validated here, so the rest of the transport can trust it.
 *
 * @param receiveSlots           receive credits offered to the peer: receives pre-posted per connection (one more is
 *                               posted as the reserve that lets the last credit carry credit back)
 * @param slotSize               bytes per receive slot; larger frames are fragmented
 * @param maxFrameSize           largest frame accepted or written
 * @param creditThreshold        unreturned credits that trigger an explicit credit frame when no data carries them;
 *                               capped at receiveSlots minus the repost group (receiveSlots/8, 1..16), below which
 *                               a one-way sender at its last credit would wait forever
 * @param sendQueueDepth         send work requests outstanding per connection at most (the send budget)
 * @param signalInterval         at most this many sends in a row go unsignaled
 * @param maxInlineData          inline bytes asked of the queue pair; 0 disables inline sends; {@link #INLINE_FITTED}
 *                               (unset, or {@code auto}): up to {@value #FITTED_INLINE_CEILING}, fitted down to what
 *                               the device allows. A number is asked as it is: a device that allows fewer inline
 *                               bytes refuses the connection, naming its limit
 * @param writeHighWaterMark     queued bytes above which a channel reports itself not writable
 * @param busyPollMicros         the longest a completion loop spins (busy-polls) before it blocks; 0 = never spin,
 *                               whatever busyPollMode says
 * @param busyPollMode           how much of busyPollMicros an idle completion loop spins: {@code adaptive} (as much
 *                               as pays, see the transport's SpinPolicy; the default), {@code fixed} (all of it,
 *                               after every completion) or {@code off} (none: block at once, as busyPollMicros=0)
 * @param completionThreads      completion loop threads per device to start with; another is added whenever every
 *                               loop's queue is full
 * @param completionQueueEntries entries of each loop's completion queue (capped by the device); each connection
 *                               reserves receiveSlots + sendQueueDepth of them
 * @param rnrRetryCount          how the peer's sends are retried when no receive is posted (7 = forever; a
 *                               safety net only, credits prevent it; tests use 0 so a credit bug fails loudly)
 * @param retryCount             transport retries on packet loss (of connections this side opens; an accepted
 *                               connection's queue pair retries as often as its peer asked); 6 by default, not 7:
 *                               Soft-RoCE (rxe) takes 7 as "for ever" and would never report a dead peer
 * @param ackTimeout             the local ACK timeout of every connection's queue pair, 4.096 us x 2^ackTimeout
 *                               (1..31; 17, 0.537 s, by default). With retryCount it makes the retry budget,
 *                               (retryCount + 1) x that timeout (3.8 s by default): a queue pair whose sends go
 *                               unacknowledged that long fails with IBV_WC_RETRY_EXC_ERR, and a port that goes down
 *                               fails its connections only once it stayed down that long
 * @param connectTimeout         bound on connect
 * @param maxReassemblyBytes     heap one connection may hold for a fragmented frame being put back together; a
 *                               peer that needs more fails its own connection (frames above it cannot be received)
 * @param reassemblyMemory       heap all connections of the transport together may hold for frames being put back
 *                               together; the connection whose fragment would exceed it fails
 * @param reassemblyTimeout      how long a fragmented frame may stay unfinished before its connection fails
 * @param closeTimeout           bound on an orderly close: pending frames are flushed for at most this long, then the
 *                               connection is disconnected; {@code close()} returns within closeTimeout + 1 s
 * @param handshakeTimeout       an accepted connection not established within this is torn down: a peer that
 *                               sends a connect request and never completes the handshake frees its queue pair
 *                               and memory after it
 * @param maxRegisteredMemory    registered (pinned) bytes this transport may hold on each device: connection
 *                               memory plus send buffer slabs; a connection that would exceed it is refused
 * @param maxCompletionLoops     completion loops (threads and queues) per device at most; at least
 *                               completionThreads (unset: 16, or completionThreads when larger)
 * @param device                 the RDMA device listeners and connections must use; null: the route chooses
 * @param tos                    RoCE type of service (0..255) of every connection; {@link Addressing#DEFAULT_TOS}:
 *                               the kernel's
 * @param sharedReceiveQueue     connections a listener accepts share their completion loop's pool of posted receives
 *                               (an SRQ) instead of posting receiveSlots + 1 each: receive memory is bounded by the
 *                               pool, not by the number of connections. Connections this side opens, and peers that
 *                               predate it, keep their own queues
 * @param sharedReceiveSlots     receives of slotSize in each completion loop's shared pool; every accepted connection
 *                               is guaranteed {@value #SHARED_MIN_CREDITS} of them and borrows more (up to
 *                               receiveSlots + 1) while the pool has them free. Unset: 512, or what a completion
 *                               queue holds beside one connection's send budget when that is less
 * @param maxQueuedBytesPerConnection bytes one connection may hold written but not known sent (its outbox and the
 *                               SENDs in flight); the write that would exceed it fails, and so does that connection,
 *                               so a writer that ignores isWritable toward a peer that takes nothing costs at most
 *                               this much of maxRegisteredMemory. At least writeHighWaterMark + maxFrameSize (what a
 *                               writer honouring isWritable may queue); unset: writeHighWaterMark + 2 x maxFrameSize
 * @param unwritableTimeout      a connection that stays unwritable this long with no frame leaving (the peer grants
 *                               no credit, or acknowledges nothing) fails, naming the key; {@link Duration#ZERO}
 *                               waits for ever
 * @param sharedReceiveReserve   receives of each shared pool that no window grows into: they are kept for the
 *                               guaranteed minimums of connections still to come, so growth never makes the pool
 *                               refuse a newcomer. Unset: an eighth of sharedReceiveSlots, at least one minimum
 *                               ({@value #SHARED_MIN_CREDITS}), at most the pool
 * @param maxPendingConnections  accepted connections whose handshake has not finished, at most, per transport: a
 *                               request beyond it is refused at once, naming the key
 * @param maxPendingConnectionsPerSource the same, per source (see ipv6SourcePrefix): one host that opens
 *                               connections and never finishes them holds at most this many, for at most
 *                               handshakeTimeout
 * @param allowedSources         the source networks an acceptor admits; {@link SourceNetworks#ANY} (unset): all
 * @param maxConnectionsPerSource connections one source may hold on an acceptor at once, pending or established: a
 *                               request beyond it is refused naming the key, so that one host cannot take the
 *                               registered memory or the completion loops meant for everyone
 * @param ipv4SourcePrefix       the prefix of an IPv4 peer's address that the per-source limits count as one source
 * @param ipv6SourcePrefix       the same for IPv6 (64: a host's addresses of one prefix, RoCE GIDs among them, are one
 *                               source)
 */
public record TransportConfig(int receiveSlots, int slotSize, int maxFrameSize, int creditThreshold,
                              int sendQueueDepth, int signalInterval, int maxInlineData, long writeHighWaterMark,
                              long busyPollMicros, BusyPollMode busyPollMode, int completionThreads,
                              int completionQueueEntries,
                              int rnrRetryCount, int retryCount, int ackTimeout, Duration connectTimeout,
                              int maxReassemblyBytes, long reassemblyMemory, Duration reassemblyTimeout,
                              Duration closeTimeout,
                              Duration handshakeTimeout, long maxRegisteredMemory, int maxCompletionLoops,
                              String device, int tos, boolean sharedReceiveQueue, int sharedReceiveSlots,
                              long maxQueuedBytesPerConnection, Duration unwritableTimeout,
                              int sharedReceiveReserve, int maxPendingConnections,
                              int maxPendingConnectionsPerSource, SourceNetworks allowedSources,
                              int maxConnectionsPerSource, int ipv4SourcePrefix, int ipv6SourcePrefix) {

    /** The most connections one source may be allowed to hold. */
    public static final int MAX_CONNECTIONS_PER_SOURCE = 1 << 20;
    /** The most unfinished handshakes a transport may be told to hold. */
    public static final int MAX_PENDING_CONNECTIONS = 65_536;
    /** maxInlineData unset: as many inline bytes as the device allows, up to {@link #FITTED_INLINE_CEILING}. */
    public static final int INLINE_FITTED = -1;
    /** The most inline bytes a fitted maxInlineData asks for. */
    public static final int FITTED_INLINE_CEILING = 256;
    /** The smallest receive slot: a frame header plus a useful payload. */
    public static final int MIN_SLOT_SIZE = 256;
    /** Credits travel in a 16-bit header field. */
    public static final int MAX_RECEIVE_SLOTS = 65535;
    public static final int MAX_SLOT_SIZE = 16 << 20;
    public static final int MAX_FRAME_SIZE_LIMIT = 1 << 30;
    /** The smallest maximum frame size: a peer that accepts less is refused at the handshake. */
    public static final int MIN_FRAME_SIZE = 4096;
    /** Receives of a shared pool guaranteed to each connection on it (its initial credits). */
    public static final int SHARED_MIN_CREDITS = 4;
    /** The most bytes one memory registration takes: the fabric registers an int length. */
    public static final int MAX_REGISTRATION_BYTES = Integer.MAX_VALUE;
    /**
     * Bytes of a connection's registration per send ring slot, for the header of the SEND in it: here, not in the
     * send ring, because the registration sizes computed below include them.
     */
    public static final int SEND_HEADER_STRIDE = 16;
    /** The longest timeout: timeouts become nanoseconds added to clock readings, which must not overflow. */
    public static final Duration MAX_TIMEOUT = Duration.ofDays(365);

    /** Keys that only a listening side reads: who may connect, and how many connections one source may hold. */
    public static final Set<String> LISTENER_KEYS = Set.of("allowedSources", "maxConnectionsPerSource",
            "ipv4SourcePrefix", "ipv6SourcePrefix");

    public static final Set<String> KEYS = Set.of("receiveSlots", "slotSize", "maxFrameSize", "creditThreshold",
            "sendQueueDepth", "signalInterval", "maxInlineData", "writeHighWaterMark", "busyPollMicros",
            "busyPollMode", "completionThreads", "completionQueueEntries", "rnrRetryCount", "retryCount",
            "ackTimeout", "connectTimeout",
            "maxReassemblyBytes", "reassemblyMemory", "reassemblyTimeout", "closeTimeout",
            "handshakeTimeout", "maxRegisteredMemory", "maxCompletionLoops",
            "device", "tos", "sharedReceiveQueue", "sharedReceiveSlots", "maxQueuedBytesPerConnection",
            "unwritableTimeout", "sharedReceiveReserve", "maxPendingConnections", "maxPendingConnectionsPerSource",
            "allowedSources", "maxConnectionsPerSource", "ipv4SourcePrefix", "ipv6SourcePrefix");

    public TransportConfig {
        range("receiveSlots", receiveSlots, 1, MAX_RECEIVE_SLOTS);
        range("slotSize", slotSize, MIN_SLOT_SIZE, MAX_SLOT_SIZE);
        range("maxFrameSize", maxFrameSize, MIN_FRAME_SIZE, MAX_FRAME_SIZE_LIMIT);
        range("creditThreshold", creditThreshold, 1, receiveSlots);
        range("sendQueueDepth", sendQueueDepth, 1, 1 << 16);
        range("signalInterval", signalInterval, 1, sendQueueDepth);
        if (maxInlineData != INLINE_FITTED && (maxInlineData < 0 || maxInlineData > 4096)) {
            throw new IllegalArgumentException("maxInlineData: must be 0..4096 or auto, got " + maxInlineData);
        }
        range("writeHighWaterMark", writeHighWaterMark, 1, Long.MAX_VALUE);
        range("busyPollMicros", busyPollMicros, 0, 10_000_000);
        if (busyPollMode == null) {
            throw new IllegalArgumentException("busyPollMode: must be set (" + BusyPollMode.VALUES + ")");
        }
        range("completionThreads", completionThreads, 1, 256);
        range("completionQueueEntries", completionQueueEntries, 64, 1 << 24);
        range("rnrRetryCount", rnrRetryCount, 0, 7);
        range("retryCount", retryCount, 0, 7);
        timeout("connectTimeout", connectTimeout);
        range("maxReassemblyBytes", maxReassemblyBytes, MIN_FRAME_SIZE, MAX_FRAME_SIZE_LIMIT);
        range("reassemblyMemory", reassemblyMemory, maxReassemblyBytes, Long.MAX_VALUE);
        timeout("reassemblyTimeout", reassemblyTimeout);
        timeout("closeTimeout", closeTimeout);
        timeout("handshakeTimeout", handshakeTimeout);
        range("maxRegisteredMemory", maxRegisteredMemory, 1 << 20, Long.MAX_VALUE);
        range("maxCompletionLoops", maxCompletionLoops, completionThreads, 256);
        // products of the values above are refused here, naming their keys: in int arithmetic they would wrap (a
        // 2 GiB receive region to 0 bytes, say) and be accepted
        long registration = registrationBytes(receiveSlots, slotSize, sendQueueDepth);
        if (registration > MAX_REGISTRATION_BYTES) {
            throw new IllegalArgumentException("receiveSlots (" + receiveSlots + ") + 1 reserve x slotSize ("
                    + slotSize + ") + sendQueueDepth (" + sendQueueDepth + ") x " + SEND_HEADER_STRIDE
                    + " header bytes = " + registration + " bytes of one connection's registration exceeds the "
                    + MAX_REGISTRATION_BYTES + " bytes one registration takes; lower receiveSlots or slotSize");
        }
        int perConnection = completionEntries(receiveSlots, sendQueueDepth, false);
        if (perConnection > completionQueueEntries) {
            throw new IllegalArgumentException("completionQueueEntries: " + completionQueueEntries
                    + " cannot hold even one connection (receiveSlots + 1 + sendQueueDepth = " + perConnection + ")");
        }
        new Addressing(device, tos, ackTimeout); // validates all three, with messages that name the key
        range("sharedReceiveSlots", sharedReceiveSlots, SHARED_MIN_CREDITS, MAX_RECEIVE_SLOTS);
        if (sharedReceiveQueue && (long) sharedReceiveSlots + sendQueueDepth > completionQueueEntries) {
            throw new IllegalArgumentException("completionQueueEntries: " + completionQueueEntries + " cannot hold "
                    + "the shared receive pool and one connection (sharedReceiveSlots + sendQueueDepth = "
                    + ((long) sharedReceiveSlots + sendQueueDepth) + "); raise it or lower sharedReceiveSlots");
        }
        // refused here rather than at every connection: a pool that can never be registered refuses them all
        long poolBytes = sharedPoolBytes(sharedReceiveSlots, slotSize);
        if (sharedReceiveQueue && poolBytes > MAX_REGISTRATION_BYTES) {
            throw new IllegalArgumentException("sharedReceiveSlots (" + sharedReceiveSlots + ") x slotSize ("
                    + slotSize + ") = " + poolBytes + " bytes of one shared receive pool exceeds the "
                    + MAX_REGISTRATION_BYTES + " bytes one registration takes; lower sharedReceiveSlots or slotSize,"
                    + " or set sharedReceiveQueue=false");
        }
        if (sharedReceiveQueue && poolBytes >= maxRegisteredMemory) {
            throw new IllegalArgumentException("maxRegisteredMemory: " + maxRegisteredMemory + " bytes cannot hold "
                    + "a shared receive pool (sharedReceiveSlots x slotSize = " + poolBytes
                    + " bytes) and a connection; raise it, lower sharedReceiveSlots or slotSize, or set "
                    + "sharedReceiveQueue=false");
        }
        long honest = saturatedAdd(writeHighWaterMark, maxFrameSize);
        if (maxQueuedBytesPerConnection < honest) {
            throw new IllegalArgumentException("maxQueuedBytesPerConnection: must be at least writeHighWaterMark ("
                    + writeHighWaterMark + ") + maxFrameSize (" + maxFrameSize + ") = " + honest + " bytes, what a "
                    + "writer honouring isWritable may queue; got " + maxQueuedBytesPerConnection);
        }
        if (unwritableTimeout == null || unwritableTimeout.isNegative()) {
            throw new IllegalArgumentException("unwritableTimeout: must be 0 (wait for ever) or positive, got "
                    + unwritableTimeout);
        }
        if (!unwritableTimeout.isZero()) {
            timeout("unwritableTimeout", unwritableTimeout);
        }
        range("sharedReceiveReserve", sharedReceiveReserve, 0, sharedReceiveSlots);
        range("maxPendingConnections", maxPendingConnections, 1, MAX_PENDING_CONNECTIONS);
        if (allowedSources == null) {
            throw new IllegalArgumentException("allowedSources: must be set (SourceNetworks.ANY admits every source)");
        }
        range("maxConnectionsPerSource", maxConnectionsPerSource, 1, MAX_CONNECTIONS_PER_SOURCE);
        range("ipv4SourcePrefix", ipv4SourcePrefix, 8, 32);
        range("ipv6SourcePrefix", ipv6SourcePrefix, 16, 128);
        range("maxPendingConnectionsPerSource", maxPendingConnectionsPerSource, 1, maxPendingConnections);
    }

    // Derived values: computed here and nowhere else, so every part of the transport sizes things alike.

    /**
     * Receives a connection on its own queue posts, and the credits it offers: receiveSlots plus one, the reserve
     * receive that lets the last credit always return credit.
     */
    public int postedReceives() {
        return postedReceives(receiveSlots);
    }

    /**
     * Consumed receives are reposted in groups of this many (receiveSlots/8, 1..16): one post call per group instead
     * of one per frame.
     */
    public int repostBatch() {
        return Math.max(1, Math.min(16, receiveSlots / 8));
    }

    /** The credit threshold of a connection on its own queue: see {@link #effectiveCreditThreshold}. */
    public int creditThresholdInForce() {
        return effectiveCreditThreshold(receiveSlots, creditThreshold, repostBatch());
    }

    /**
     * The credit threshold in force: at most {@code receiveSlots - repostBatch}. When a one-way sender is down to its
     * last credit (which it may spend only on a frame that returns credit) and has received everything, the receiver
     * holds the other receiveSlots credits: fewer than repostBatch as consumed slots awaiting their repost, the rest
     * reposted and owed. Unless the owed ones alone reach the threshold, no credit frame would ever go and both
     * sides would wait for each other forever.
     */
    static int effectiveCreditThreshold(int receiveSlots, int creditThreshold, int repostBatch) {
        return Math.max(1, Math.min(creditThreshold, receiveSlots - repostBatch));
    }

    /**
     * The credit threshold of a connection on a shared pool that holds {@code credits} there: a one-way sender at
     * its last credit leaves the receiver holding credits - 1 owed ones, so the threshold must not exceed that.
     */
    public int sharedCreditThreshold(int credits) {
        return Math.max(1, Math.min(creditThreshold, credits - 1));
    }

    /** The most credits a connection on a shared pool grows to: what it would post on its own queue. */
    public int sharedMaxCredits() {
        return Math.max(SHARED_MIN_CREDITS, postedReceives());
    }

    /**
     * Completion queue entries one connection can ever have outstanding: its posted receives plus its send budget;
     * on a shared pool the send budget alone (the loop reserves the pool's receives once).
     */
    public int completionEntriesPerConnection(boolean sharesReceives) {
        return completionEntries(receiveSlots, sendQueueDepth, sharesReceives);
    }

    /** Bytes of a connection's receive slots: postedReceives x slotSize (checked to fit one registration). */
    public int receiveRegionBytes() {
        return postedReceives() * slotSize;
    }

    /**
     * Bytes of a connection's own registration: its receive slots (unless it shares a pool) followed by one send
     * header per send queue slot.
     */
    public int registeredBytesPerConnection(boolean sharesReceives) {
        return (sharesReceives ? 0 : receiveRegionBytes()) + sendHeaderBytes(sendQueueDepth);
    }

    /** Bytes of each completion loop's shared receive pool: sharedReceiveSlots x slotSize (checked when used). */
    public long sharedPoolBytes() {
        return sharedPoolBytes(sharedReceiveSlots, slotSize);
    }

    // the formulas, taking the values as arguments so that the constructor can check them before the fields are set

    private static int postedReceives(int receiveSlots) {
        return receiveSlots + 1;
    }

    private static int completionEntries(int receiveSlots, int sendQueueDepth, boolean sharesReceives) {
        return (sharesReceives ? 0 : postedReceives(receiveSlots)) + sendQueueDepth;
    }

    private static int sendHeaderBytes(int sendQueueDepth) {
        return sendQueueDepth * SEND_HEADER_STRIDE;
    }

    /** A connection's own registration on its own queue, in long: the constructor refuses what an int cannot hold. */
    private static long registrationBytes(int receiveSlots, int slotSize, int sendQueueDepth) {
        return (long) postedReceives(receiveSlots) * slotSize + sendHeaderBytes(sendQueueDepth);
    }

    private static long sharedPoolBytes(int sharedReceiveSlots, int slotSize) {
        return (long) sharedReceiveSlots * slotSize;
    }

    /**
     * The retry budget of a connection this side opens: (retryCount + 1) x 4.096 us x 2^ackTimeout, how long its
     * queue pair sends unacknowledged before it fails with IBV_WC_RETRY_EXC_ERR (7 x 0.537 s = 3.8 s by default).
     * An accepted connection's budget assumes {@link Addressing#ACCEPTED_RETRY_COUNT} instead of retryCount.
     */
    public Duration retryBudget() {
        return addressing().retryBudget(retryCount);
    }

    /** The device, type of service and ACK timeout as the fabric takes them. */
    public Addressing addressing() {
        return new Addressing(device, tos, ackTimeout);
    }

    /**
     * How an idle completion loop uses its {@code busyPollMicros} (key {@code busyPollMode}, case-insensitive).
     * {@code busyPollMicros=0} never spins in any mode.
     */
    public enum BusyPollMode {
        /** Spins as much of busyPollMicros as pays, blocks when idle (the transport's SpinPolicy); the default. */
        ADAPTIVE,
        /**
         * Spins all of busyPollMicros after every completion before blocking: the lowest latency for any traffic,
         * and up to busyPollMicros of CPU per completion, pings of idle connections included.
         */
        FIXED,
        /** Never spins: every completion that finds the loop idle pays a wake-up; the least CPU. */
        OFF;

        static final String VALUES = "adaptive (spin as long as it pays, the default), fixed (always spin up to "
                + "busyPollMicros) or off (never spin); busyPollMicros=0 never spins in any mode";

        static BusyPollMode parse(String key, Object v) {
            if (v instanceof BusyPollMode m) {
                return m;
            }
            String s = v == null ? "" : v.toString().trim().toUpperCase(Locale.ROOT);
            for (BusyPollMode m : values()) {
                if (m.name().equals(s)) {
                    return m;
                }
            }
            throw new IllegalArgumentException(key + ": expected " + VALUES + ", got '" + v + "'");
        }
    }

    public static TransportConfig defaults() {
        return builder().build();
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Whether maxInlineData is left to the device: {@link #INLINE_FITTED}. */
    public boolean inlineFitted() {
        return maxInlineData == INLINE_FITTED;
    }

    /** The inline bytes to ask of a queue pair before fitting: maxInlineData, or its ceiling when fitted. */
    public int inlineWanted() {
        return inlineFitted() ? FITTED_INLINE_CEILING : maxInlineData;
    }

    /** A builder starting from this configuration. */
    public Builder toBuilder() {
        Builder b = new Builder();
        b.receiveSlots = receiveSlots;
        b.slotSize = slotSize;
        b.maxFrameSize = maxFrameSize;
        // derived values stay derived, so changing receiveSlots or sendQueueDepth keeps them consistent
        b.creditThreshold = creditThreshold == defaultCreditThreshold(receiveSlots) ? null : creditThreshold;
        b.sendQueueDepth = sendQueueDepth;
        b.signalInterval = signalInterval == defaultSignalInterval(sendQueueDepth) ? null : signalInterval;
        b.maxInlineData = maxInlineData;
        b.writeHighWaterMark = writeHighWaterMark;
        b.busyPollMicros = busyPollMicros;
        b.busyPollMode = busyPollMode;
        b.completionThreads = completionThreads;
        b.completionQueueEntries = completionQueueEntries;
        b.rnrRetryCount = rnrRetryCount;
        b.retryCount = retryCount;
        b.ackTimeout = ackTimeout;
        b.connectTimeout = connectTimeout;
        b.maxReassemblyBytes = maxReassemblyBytes;
        b.reassemblyMemory = reassemblyMemory;
        b.reassemblyTimeout = reassemblyTimeout;
        b.closeTimeout = closeTimeout;
        b.handshakeTimeout = handshakeTimeout;
        b.maxRegisteredMemory = maxRegisteredMemory;
        b.maxCompletionLoops = maxCompletionLoops == defaultMaxCompletionLoops(completionThreads) ? null
                : maxCompletionLoops;
        b.device = device;
        b.tos = tos;
        b.sharedReceiveQueue = sharedReceiveQueue;
        b.sharedReceiveSlots = sharedReceiveSlots == defaultSharedReceiveSlots(completionQueueEntries, sendQueueDepth)
                ? null : sharedReceiveSlots;
        b.maxQueuedBytesPerConnection = maxQueuedBytesPerConnection == defaultMaxQueuedBytesPerConnection(
                writeHighWaterMark, maxFrameSize) ? null : maxQueuedBytesPerConnection;
        b.unwritableTimeout = unwritableTimeout;
        b.sharedReceiveReserve = sharedReceiveReserve == defaultSharedReceiveReserve(sharedReceiveSlots) ? null
                : sharedReceiveReserve;
        b.maxPendingConnections = maxPendingConnections;
        b.maxPendingConnectionsPerSource = maxPendingConnectionsPerSource;
        b.allowedSources = allowedSources;
        b.maxConnectionsPerSource = maxConnectionsPerSource;
        b.ipv4SourcePrefix = ipv4SourcePrefix;
        b.ipv6SourcePrefix = ipv6SourcePrefix;
        return b;
    }

    /**
     * Builds a configuration from key/value pairs (URL parameters): keys are the component names of this record,
     * values numbers or strings. Sizes accept k/m/g suffixes ({@code 16k}, {@code 64MiB}); {@code connectTimeout}
     * accepts milliseconds, {@code 500ms}, {@code 10s} or ISO-8601 ({@code PT10S}). Missing keys keep their
     * defaults; {@code creditThreshold} defaults to a quarter of {@code receiveSlots}.
     *
     * @throws IllegalArgumentException naming every unknown key, or the first bad value and its key
     */
    public static TransportConfig fromMap(Map<String, ?> values) {
        Set<String> unknown = new TreeSet<>(values.keySet());
        unknown.removeAll(KEYS);
        if (!unknown.isEmpty()) {
            throw new IllegalArgumentException("unknown RDMA transport parameter(s) " + unknown + "; known: "
                    + new TreeSet<>(KEYS));
        }
        Builder b = builder();
        for (Map.Entry<String, ?> e : values.entrySet()) {
            String key = e.getKey();
            Object v = e.getValue();
            switch (key) {
                case "receiveSlots": b.receiveSlots = toInt(key, v, false); break;
                case "slotSize": b.slotSize = toInt(key, v, true); break;
                case "maxFrameSize": b.maxFrameSize = toInt(key, v, true); break;
                case "creditThreshold": b.creditThreshold = toInt(key, v, false); break;
                case "sendQueueDepth": b.sendQueueDepth = toInt(key, v, false); break;
                case "signalInterval": b.signalInterval = toInt(key, v, false); break;
                case "maxInlineData": b.maxInlineData = toInline(key, v); break;
                case "writeHighWaterMark": b.writeHighWaterMark = toLong(key, v, true); break;
                case "busyPollMicros": b.busyPollMicros = toLong(key, v, false); break;
                case "busyPollMode": b.busyPollMode = BusyPollMode.parse(key, v); break;
                case "completionThreads": b.completionThreads = toInt(key, v, false); break;
                case "completionQueueEntries": b.completionQueueEntries = toInt(key, v, false); break;
                case "rnrRetryCount": b.rnrRetryCount = toInt(key, v, false); break;
                case "retryCount": b.retryCount = toInt(key, v, false); break;
                case "ackTimeout": b.ackTimeout = Addressing.requireAckTimeout(toInt(key, v, false)); break;
                case "connectTimeout": b.connectTimeout = toDuration(key, v); break;
                case "maxReassemblyBytes": b.maxReassemblyBytes = toInt(key, v, true); break;
                case "reassemblyMemory": b.reassemblyMemory = toLong(key, v, true); break;
                case "reassemblyTimeout": b.reassemblyTimeout = toDuration(key, v); break;
                case "closeTimeout": b.closeTimeout = toDuration(key, v); break;
                case "handshakeTimeout": b.handshakeTimeout = toDuration(key, v); break;
                case "maxRegisteredMemory": b.maxRegisteredMemory = toLong(key, v, true); break;
                case "maxCompletionLoops": b.maxCompletionLoops = toInt(key, v, false); break;
                case "device": b.device = toDevice(v); break;
                case "tos": b.tos = Addressing.requireTos(toInt(key, v, false)); break;
                case "sharedReceiveQueue": b.sharedReceiveQueue = toBoolean(key, v); break;
                case "sharedReceiveSlots": b.sharedReceiveSlots = toInt(key, v, false); break;
                case "maxQueuedBytesPerConnection": b.maxQueuedBytesPerConnection = toLong(key, v, true); break;
                case "unwritableTimeout": b.unwritableTimeout = toDuration(key, v); break;
                case "sharedReceiveReserve": b.sharedReceiveReserve = toInt(key, v, false); break;
                case "maxPendingConnections": b.maxPendingConnections = toInt(key, v, false); break;
                case "maxPendingConnectionsPerSource": b.maxPendingConnectionsPerSource = toInt(key, v, false); break;
                case "allowedSources": b.allowedSources = SourceNetworks.parse(key, String.valueOf(v)); break;
                case "maxConnectionsPerSource": b.maxConnectionsPerSource = toInt(key, v, false); break;
                case "ipv4SourcePrefix": b.ipv4SourcePrefix = toInt(key, v, false); break;
                case "ipv6SourcePrefix": b.ipv6SourcePrefix = toInt(key, v, false); break;
                default: throw new AssertionError(key);
            }
        }
        return b.build();
    }

    /** {@code auto}: {@link #INLINE_FITTED}; otherwise a size of 0..4096 (a negative one is not auto). */
    private static int toInline(String key, Object v) {
        if ("auto".equalsIgnoreCase(String.valueOf(v).trim())) {
            return INLINE_FITTED;
        }
        int n = toInt(key, v, true);
        if (n < 0) {
            throw new IllegalArgumentException(key + ": must be 0..4096 or auto, got " + v);
        }
        return n;
    }

    /** Unset, the credit threshold is a quarter of the receive slots. */
    static int defaultCreditThreshold(int receiveSlots) {
        return Math.max(1, receiveSlots / 4);
    }

    /** Unset, the signal interval is 16, or the whole send queue when that is smaller. */
    static int defaultSignalInterval(int sendQueueDepth) {
        return Math.max(1, Math.min(16, sendQueueDepth));
    }

    /** Unset, the pool is 512 receives, or what a completion queue holds beside one connection's sends. */
    static int defaultSharedReceiveSlots(int completionQueueEntries, int sendQueueDepth) {
        return Math.max(SHARED_MIN_CREDITS, Math.min(512, completionQueueEntries - sendQueueDepth));
    }

    /**
     * Unset, an eighth of the pool is kept from growth: at the default 512, 64 receives, the minimums of 16
     * newcomers; never less than one minimum (a pool of 24 still admits one more), never more than the pool.
     */
    static int defaultSharedReceiveReserve(int sharedReceiveSlots) {
        return Math.min(sharedReceiveSlots, Math.max(SHARED_MIN_CREDITS, sharedReceiveSlots / 8));
    }

    /**
     * Unset, a connection may queue writeHighWaterMark + 2 x maxFrameSize: what a writer honouring isWritable may
     * queue (it stops above the mark, after a write of up to maxFrameSize), with a frame of room for a second thread
     * that checked isWritable at the same moment.
     */
    static long defaultMaxQueuedBytesPerConnection(long writeHighWaterMark, int maxFrameSize) {
        return saturatedAdd(writeHighWaterMark, 2L * maxFrameSize);
    }

    private static long saturatedAdd(long a, long b) {
        long sum = a + b;
        return sum < a ? Long.MAX_VALUE : sum; // both non-negative here: an overflow wraps below a
    }

    /** Unset, the loop cap is 16, or completionThreads when more are asked for at start. */
    static int defaultMaxCompletionLoops(int completionThreads) {
        return Math.max(16, completionThreads);
    }

    private static void range(String key, long value, long min, long max) {
        if (value < min || value > max) {
            throw new IllegalArgumentException(key + ": must be " + min + ".." + max + ", got " + value);
        }
    }

    private static void timeout(String key, Duration value) {
        if (value == null || value.isNegative() || value.isZero()) {
            throw new IllegalArgumentException(key + ": must be positive, got " + value);
        }
        if (value.compareTo(MAX_TIMEOUT) > 0) {
            throw new IllegalArgumentException(key + ": must be at most " + MAX_TIMEOUT + " (365 days), got "
                    + value);
        }
    }

    /**
     * A whole number as a user writes a key's value (an Integer, or a String of digits), within [min, max]; refused
     * otherwise with the key and the range in the message. For the adapters' own keys, so that every key is parsed
     * alike.
     */
    public static int intValue(String key, Object v, int min, int max) {
        int value = toInt(key, v, false);
        if (value < min || value > max) {
            throw new IllegalArgumentException(key + ": must be " + min + ".." + max + ", got " + value);
        }
        return value;
    }

    /** true or false (any case), as a user writes a key's value; anything else is refused naming the key. */
    public static boolean booleanValue(String key, Object v) {
        return toBoolean(key, v);
    }

    private static int toInt(String key, Object v, boolean size) {
        long l = toLong(key, v, size);
        if (l < Integer.MIN_VALUE || l > Integer.MAX_VALUE) {
            throw new IllegalArgumentException(key + ": out of range: " + v);
        }
        return (int) l;
    }

    private static long toLong(String key, Object v, boolean size) {
        if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte) {
            return ((Number) v).longValue();
        }
        if (!(v instanceof String)) {
            throw new IllegalArgumentException(key + ": expected a number, got " + v);
        }
        String s = ((String) v).trim().toLowerCase(Locale.ROOT);
        long multiplier = 1;
        if (size) {
            if (s.endsWith("ib")) {
                s = s.substring(0, s.length() - 2);
            } else if (s.endsWith("b")) {
                s = s.substring(0, s.length() - 1);
            }
            if (s.endsWith("k")) {
                multiplier = 1L << 10;
            } else if (s.endsWith("m")) {
                multiplier = 1L << 20;
            } else if (s.endsWith("g")) {
                multiplier = 1L << 30;
            }
            if (multiplier != 1) {
                s = s.substring(0, s.length() - 1).trim();
            }
        }
        try {
            return Math.multiplyExact(Long.parseLong(s), multiplier);
        } catch (NumberFormatException | ArithmeticException ex) {
            throw new IllegalArgumentException(key + ": not a" + (size ? " size" : "n integer") + ": '" + v + "'");
        }
    }

    private static boolean toBoolean(String key, Object v) {
        if (v instanceof Boolean) {
            return (Boolean) v;
        }
        String s = v == null ? "" : v.toString().trim().toLowerCase(Locale.ROOT);
        if (s.equals("true") || s.equals("false")) {
            return Boolean.parseBoolean(s);
        }
        throw new IllegalArgumentException(key + ": expected true or false, got '" + v + "'");
    }

    /** Blank means unset, so a property placeholder that resolves to nothing does not pin a device. */
    private static String toDevice(Object v) {
        String s = v == null ? "" : v.toString().trim();
        return s.isEmpty() ? null : s;
    }

    private static Duration toDuration(String key, Object v) {
        if (v instanceof Duration) {
            return (Duration) v;
        }
        if (v instanceof Integer || v instanceof Long) {
            return Duration.ofMillis(((Number) v).longValue());
        }
        if (!(v instanceof String)) {
            throw new IllegalArgumentException(key + ": expected a duration, got " + v);
        }
        String s = ((String) v).trim().toLowerCase(Locale.ROOT);
        try {
            if (s.startsWith("pt")) {
                return Duration.parse(s.toUpperCase(Locale.ROOT));
            }
            if (s.endsWith("ms")) {
                return Duration.ofMillis(Long.parseLong(s.substring(0, s.length() - 2).trim()));
            }
            if (s.endsWith("s")) {
                return Duration.ofSeconds(Long.parseLong(s.substring(0, s.length() - 1).trim()));
            }
            return Duration.ofMillis(Long.parseLong(s));
        } catch (NumberFormatException | DateTimeParseException ex) {
            throw new IllegalArgumentException(key + ": not a duration: '" + v + "' (use e.g. 10s, 500ms or PT10S)");
        }
    }

    /** Mutable builder; unset, {@code creditThreshold} is a quarter of {@code receiveSlots} and {@code signalInterval}
     * is 16 or the send queue depth when smaller. */
    public static final class Builder {
        private int receiveSlots = 64;
        private int slotSize = 16 << 10;
        private int maxFrameSize = 64 << 20;
        private Integer creditThreshold;
        private int sendQueueDepth = 128;
        private Integer signalInterval;
        private int maxInlineData = INLINE_FITTED;
        private long writeHighWaterMark = 4 << 20;
        private long busyPollMicros = 50;
        private BusyPollMode busyPollMode = BusyPollMode.ADAPTIVE;
        private int completionThreads = 1;
        private int completionQueueEntries = 16384;
        private int rnrRetryCount = 7;
        private int retryCount = 6; // not 7: Soft-RoCE (rxe) retries for ever at 7, a dead peer never reported
        private int ackTimeout = Addressing.DEFAULT_ACK_TIMEOUT;
        private Duration connectTimeout = Duration.ofSeconds(10);
        private int maxReassemblyBytes = 64 << 20;
        private long reassemblyMemory = 256L << 20;
        private Duration reassemblyTimeout = Duration.ofSeconds(30);
        private Duration closeTimeout = Duration.ofSeconds(2);
        private Duration handshakeTimeout = Duration.ofSeconds(10);
        private long maxRegisteredMemory = 1L << 30;
        private Integer maxCompletionLoops;
        private String device;
        private int tos = Addressing.DEFAULT_TOS;
        private boolean sharedReceiveQueue = true;
        private Integer sharedReceiveSlots;
        private Long maxQueuedBytesPerConnection;
        private Duration unwritableTimeout = Duration.ofSeconds(30);
        private Integer sharedReceiveReserve;
        private int maxPendingConnections = 512;
        private int maxPendingConnectionsPerSource = 64;
        private SourceNetworks allowedSources = SourceNetworks.ANY;
        private int maxConnectionsPerSource = 512;
        private int ipv4SourcePrefix = 32;
        private int ipv6SourcePrefix = 64;

        private Builder() {
        }

        public Builder receiveSlots(int v) { receiveSlots = v; return this; }
        public Builder slotSize(int v) { slotSize = v; return this; }
        public Builder maxFrameSize(int v) { maxFrameSize = v; return this; }
        public Builder creditThreshold(int v) { creditThreshold = v; return this; }
        public Builder sendQueueDepth(int v) { sendQueueDepth = v; return this; }
        public Builder signalInterval(int v) { signalInterval = v; return this; }
        public Builder maxInlineData(int v) { maxInlineData = v; return this; }
        public Builder writeHighWaterMark(long v) { writeHighWaterMark = v; return this; }
        public Builder busyPollMicros(long v) { busyPollMicros = v; return this; }
        public Builder busyPollMode(BusyPollMode v) { busyPollMode = v; return this; }
        public Builder completionThreads(int v) { completionThreads = v; return this; }
        public Builder completionQueueEntries(int v) { completionQueueEntries = v; return this; }
        public Builder rnrRetryCount(int v) { rnrRetryCount = v; return this; }
        public Builder retryCount(int v) { retryCount = v; return this; }
        public Builder ackTimeout(int v) { ackTimeout = v; return this; }
        public Builder connectTimeout(Duration v) { connectTimeout = v; return this; }
        public Builder maxReassemblyBytes(int v) { maxReassemblyBytes = v; return this; }
        public Builder reassemblyMemory(long v) { reassemblyMemory = v; return this; }
        public Builder reassemblyTimeout(Duration v) { reassemblyTimeout = v; return this; }
        public Builder closeTimeout(Duration v) { closeTimeout = v; return this; }
        public Builder handshakeTimeout(Duration v) { handshakeTimeout = v; return this; }
        public Builder maxRegisteredMemory(long v) { maxRegisteredMemory = v; return this; }
        public Builder maxCompletionLoops(int v) { maxCompletionLoops = v; return this; }
        public Builder device(String v) { device = v; return this; }
        public Builder tos(int v) { tos = v; return this; }
        public Builder sharedReceiveQueue(boolean v) { sharedReceiveQueue = v; return this; }
        public Builder sharedReceiveSlots(int v) { sharedReceiveSlots = v; return this; }
        public Builder maxQueuedBytesPerConnection(long v) { maxQueuedBytesPerConnection = v; return this; }
        public Builder unwritableTimeout(Duration v) { unwritableTimeout = v; return this; }
        public Builder sharedReceiveReserve(int v) { sharedReceiveReserve = v; return this; }
        public Builder maxPendingConnections(int v) { maxPendingConnections = v; return this; }
        public Builder maxPendingConnectionsPerSource(int v) { maxPendingConnectionsPerSource = v; return this; }
        public Builder allowedSources(SourceNetworks v) { allowedSources = v; return this; }
        public Builder maxConnectionsPerSource(int v) { maxConnectionsPerSource = v; return this; }
        public Builder ipv4SourcePrefix(int v) { ipv4SourcePrefix = v; return this; }
        public Builder ipv6SourcePrefix(int v) { ipv6SourcePrefix = v; return this; }

        public TransportConfig build() {
            int threshold = creditThreshold != null ? creditThreshold : defaultCreditThreshold(receiveSlots);
            int interval = signalInterval != null ? signalInterval : defaultSignalInterval(sendQueueDepth);
            int pool = sharedReceiveSlots != null ? sharedReceiveSlots
                    : defaultSharedReceiveSlots(completionQueueEntries, sendQueueDepth);
            return new TransportConfig(receiveSlots, slotSize, maxFrameSize, threshold, sendQueueDepth, interval, maxInlineData, writeHighWaterMark,
                    busyPollMicros, busyPollMode, completionThreads, completionQueueEntries, rnrRetryCount, retryCount,
                    ackTimeout, connectTimeout,
                    maxReassemblyBytes, reassemblyMemory, reassemblyTimeout, closeTimeout, handshakeTimeout, maxRegisteredMemory,
                    maxCompletionLoops != null ? maxCompletionLoops : defaultMaxCompletionLoops(completionThreads),
                    device, tos, sharedReceiveQueue, pool,
                    maxQueuedBytesPerConnection != null ? maxQueuedBytesPerConnection
                            : defaultMaxQueuedBytesPerConnection(writeHighWaterMark, maxFrameSize),
                    unwritableTimeout,
                    sharedReceiveReserve != null ? sharedReceiveReserve : defaultSharedReceiveReserve(pool),
                    maxPendingConnections, maxPendingConnectionsPerSource, allowedSources, maxConnectionsPerSource,
                    ipv4SourcePrefix, ipv6SourcePrefix);
        }
    }
}
