package dev.artemisrdma.transport.channel;

/**
 * The lifecycle of a channel, its close included, as one state machine: every state names what it waits for and
 * holds one deadline, set on entering it ({@link ChannelLifecycle}). Every change goes through {@link #moveTo}, which
 * refuses a transition the lifecycle does not have, so a path that would, say, reopen a draining channel fails loudly
 * instead of corrupting it.
 *
 * <pre>
 *  CONNECTING --close--&gt; CONNECTING_CLOSE_ASKED --established--&gt; FLUSHING
 *      |--established--&gt; OPEN --close--&gt; FLUSHING --goodbye posted--&gt; GOODBYE_SENT --ring empty--&gt; DRAINING
 *      |                   |                |                             |                           |
 *      |  failure, forceClose, closeTimeout, a flush with the peer's goodbye seen ----------------------&gt;+
 *      |  rdma_cm's DISCONNECTED ----------------------------------------------------&gt; PEER_DRAINING    |
 *      |  flushes and no DISCONNECTED yet --&gt; FLUSHED_AWAITING_EVENT --DISCONNECTED--&gt; PEER_DRAINING    |
 *      |                                          +-- 200 ms and drained ----------------------------+   |
 *      +-- connect/accept aborted --&gt; RELEASING --(loop thread)--&gt; CLOSED &lt;--(loop thread)-- drained --+
 *      +-- aborted before any completion loop slot was taken ----&gt; CLOSED
 * </pre>
 * "established" is rdma_cm's event, or on the passive side the peer's first frame if that comes first.
 * A connect or accept that fails while its channel is already draining cuts the drain short: the queue pair is
 * destroyed at once and the drain moves to RELEASING.
 *
 * <p>The order of the constants is used: those before FLUSHED_AWAITING_EVENT are not tearing down.
 */
enum ChannelState {
    /** Queue pair being set up or handshake not finished; written frames wait. */
    CONNECTING("ESTABLISHED, connect's return or the peer's first frame; a close, a failure, the handshake deadline",
            Deadline.NONE),
    /** A close was asked before the channel was established: it goes on closing once it is. */
    CONNECTING_CLOSE_ASKED("establishment, to go on closing; a failure, the handshake deadline", Deadline.CLOSE),
    /** Frames flow. */
    OPEN("a close or forceClose, a failure, rdma_cm's DISCONNECTED, a failed or flushed completion", Deadline.NONE),
    /** Orderly close: the frames written go first; the goodbye waits for an empty outbox and a credit. */
    FLUSHING("the outbox empty and a credit for the goodbye (or the peer's goodbye and no credit left)",
            Deadline.CLOSE),
    /** The goodbye, the last SEND, is posted: nothing more is. */
    GOODBYE_SENT("the send ring empty (the goodbye's completion retires every SEND before it)", Deadline.CLOSE),
    /** Disconnected by flushes alone: the DISCONNECTED event, if it comes, gives the better reason. */
    FLUSHED_AWAITING_EVENT("rdma_cm's DISCONNECTED, which names the reason; from 200 ms on, the drain as DRAINING",
            Deadline.FLUSH_GRACE),
    /** Disconnected: every posted work request is coming back (flushed) before the queue pair is destroyed. */
    DRAINING("every posted receive and signaled send back; on a shared pool, a poll begun after the drain found the "
            + "queue drained", Deadline.DRAIN),
    /** Disconnected by the peer: as DRAINING, and what the peer sent before it is still delivered. */
    PEER_DRAINING("as DRAINING; successful receives are still delivered", Deadline.DRAIN),
    /** Never established and its queue pair already destroyed: its memory waits for the loop thread to free it. */
    RELEASING("the loop thread, to free the memory", Deadline.NONE),
    /** Everything released. */
    CLOSED("nothing", Deadline.NONE);

    /** The one deadline a state holds, set on entering it (see {@link ChannelLifecycle}). */
    enum Deadline {
        /** None: an open channel's unwritableTimeout is the send side's; the handshake's is the transport timer's. */
        NONE,
        /** closeTimeout, from the close's request (carried from CONNECTING_CLOSE_ASKED to FLUSHING to GOODBYE_SENT). */
        CLOSE,
        /** 200 ms for the DISCONNECTED event; the drain's 5 s count from entering, as DRAINING's. */
        FLUSH_GRACE,
        /** 5 s from the disconnect (from the flushes, when FLUSHED_AWAITING_EVENT came first). */
        DRAIN
    }

    private final String waitsFor;
    private final Deadline deadline;

    ChannelState(String waitsFor, Deadline deadline) {
        this.waitsFor = waitsFor;
        this.deadline = deadline;
    }

    /** What the channel waits for in this state (for readers of the code, and tests). */
    String waitsFor() {
        return waitsFor;
    }

    /** The deadline this state holds. */
    Deadline deadline() {
        return deadline;
    }

    boolean canMoveTo(ChannelState next) {
        return switch (this) {
            case CONNECTING -> next != CONNECTING && next != FLUSHING && next != GOODBYE_SENT;
            case CONNECTING_CLOSE_ASKED -> next == FLUSHING || next.compareTo(GOODBYE_SENT) > 0;
            case OPEN -> next == FLUSHING || next == FLUSHED_AWAITING_EVENT || next == DRAINING
                    || next == PEER_DRAINING;
            case FLUSHING -> next == GOODBYE_SENT || next == FLUSHED_AWAITING_EVENT || next == DRAINING
                    || next == PEER_DRAINING;
            case GOODBYE_SENT -> next == FLUSHED_AWAITING_EVENT || next == DRAINING || next == PEER_DRAINING;
            case FLUSHED_AWAITING_EVENT -> next == PEER_DRAINING || next == RELEASING || next == CLOSED;
            case DRAINING, PEER_DRAINING -> next == RELEASING || next == CLOSED;
            case RELEASING -> next == CLOSED;
            case CLOSED -> false;
        };
    }

    /** The state after a legal transition to {@code next}. */
    ChannelState moveTo(ChannelState next, String channel) {
        if (!canMoveTo(next)) {
            throw new IllegalStateException("channel " + channel + ": illegal transition " + this + " -> " + next);
        }
        return next;
    }

    /** This state's bit in a path (see {@link #path}). */
    int bit() {
        return 1 << ordinal();
    }

    /**
     * The path a channel took, from the bits of the states it has been in: every move goes to a later state, so the
     * order of the constants is the order they were visited in.
     */
    static String path(int bits) {
        StringBuilder b = new StringBuilder();
        for (ChannelState s : values()) {
            if ((bits & s.bit()) != 0) {
                b.append(b.length() == 0 ? "" : ">").append(s);
            }
        }
        return b.toString();
    }

    /** Not established yet, a close asked or not. */
    boolean connecting() {
        return this == CONNECTING || this == CONNECTING_CLOSE_ASKED;
    }

    /** Frames may still be posted (the goodbye is the last SEND: none after it). */
    boolean sends() {
        return this == OPEN || this == FLUSHING;
    }

    /** An orderly close under way: FLUSHING or GOODBYE_SENT, bounded by closeTimeout. */
    boolean closing() {
        return this == FLUSHING || this == GOODBYE_SENT;
    }

    /** Disconnected, waiting for the work requests to come back. */
    boolean draining() {
        return this == FLUSHED_AWAITING_EVENT || this == DRAINING || this == PEER_DRAINING;
    }

    /** Teardown has begun: receives are not reposted and nothing more is delivered (but in PEER_DRAINING). */
    boolean tearingDown() {
        return compareTo(GOODBYE_SENT) > 0;
    }
}
