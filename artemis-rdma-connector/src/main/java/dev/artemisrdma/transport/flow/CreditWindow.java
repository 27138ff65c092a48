package dev.artemisrdma.transport.flow;

import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.wire.FrameHeader;
import dev.artemisrdma.transport.wire.ImmediateHeader;

/**
 * Receive-credit accounting of one connection, both directions. Not thread-safe: the channel holds its lock.
 *
 * <p>Send side: one credit is one receive the peer has posted for us; a SEND without a credit would hit an empty
 * receive queue (RNR). Receive side: every receive we repost is a credit we owe the peer; it travels back in the
 * header of our next SEND, or in an explicit credit frame once {@code threshold} have piled up.
 *
 * <p>The last credit is spent only on a SEND that also returns credit (Qpid's rule). Otherwise both sides could
 * spend their last credits on data at the same time and then each hold credit for the other that it has no
 * credit left to send: a deadlock at zero. Each side posts one receive more than the credits it means to offer,
 * so even a window of one frame keeps flowing under this rule.
 *
 * <p>Bounded: the peer can never grant more credits than the receives it advertised in its handshake (each credit
 * is one of them), so a grant that would lift {@code sendCredits} above that is a protocol error, never an
 * overflow. Until the handshake is known the bound is the protocol's largest window.
 */
public final class CreditWindow {

    /** The most credits the protocol can carry: every receive a peer may advertise. */
    public static final int MAX_WINDOW = TransportConfig.MAX_RECEIVE_SLOTS + 1;

    private int threshold;
    private int limit = MAX_WINDOW;
    private int sendCredits;
    private int owed;
    private boolean returning = true;
    /**
     * Credits the peer holds for our receives: what our handshake offered plus what we returned since, less the
     * SENDs that arrived. Below zero the peer sent without credit; -1 until {@link #offered} (nothing checked).
     */
    private long peerCredits = -1;

    public CreditWindow(int threshold) {
        if (threshold < 1) {
            throw new IllegalArgumentException("threshold " + threshold);
        }
        this.threshold = threshold;
    }

    /**
     * The peer's handshake: it posted {@code receives} receives for us, so we can never hold more credits than that.
     *
     * @throws FabricException when credits already granted exceed it (a peer that returned credit before any send)
     */
    public void limit(int receives) throws FabricException {
        if (receives < 1 || receives > MAX_WINDOW) {
            throw new FabricException("protocol error: the peer advertises " + receives + " receives, outside 1.."
                    + MAX_WINDOW);
        }
        limit = receives;
        grant(0);
    }

    /**
     * Credits the peer granted: its initial credits, or credits returned in a header.
     *
     * @throws FabricException when the grant would give us more credits than the peer has receives
     */
    public void grant(int credits) throws FabricException {
        long after = (long) sendCredits + credits;
        if (credits < 0 || after > limit) {
            throw new FabricException("protocol error: the peer granted " + credits + " credits with " + sendCredits
                    + " unspent, more than the " + limit + " receives it advertised");
        }
        sendCredits = (int) after;
    }

    /** Our handshake offers the peer {@code receives} credits: the receives we post before it may send. */
    public void offered(int receives) {
        peerCredits = receives;
    }

    /**
     * {@code sends} SENDs of the peer arrived, each spending one of its credits.
     *
     * @throws FabricException when the peer has sent more than the credits it was granted (it ignores flow control;
     *                         what landed did so in receives reposted before their credit went back)
     */
    public void arrived(int sends) throws FabricException {
        if (peerCredits < 0 || sends == 0) {
            return;
        }
        peerCredits -= sends;
        if (peerCredits < 0) {
            throw new FabricException("protocol error: the peer sent " + (-peerCredits) + " SEND(s) beyond the "
                    + "receive credits it was granted (it ignores credit flow control)");
        }
    }

    /**
     * The peer gave back {@code credits} of the credits it held, unspent ({@link FrameHeader#RELEASE}).
     *
     * @throws FabricException when it gives back more than it holds (its receives would be counted twice)
     */
    public void peerReleased(int credits) throws FabricException {
        if (peerCredits < 0 || credits == 0) {
            return;
        }
        peerCredits -= credits;
        if (peerCredits < 0) {
            throw new FabricException("protocol error: the peer gave back " + credits + " credits, "
                    + (-peerCredits) + " more than it held");
        }
    }

    /**
     * We give back {@code credits} unspent credits (the peer recalled them): after the SEND that says so has spent its
     * own, at least one is left.
     */
    public void release(int credits) {
        if (credits < 1 || credits >= sendCredits) {
            throw new IllegalArgumentException("releasing " + credits + " of " + sendCredits + " credits");
        }
        sendCredits -= credits;
    }

    /** Receives were reposted: their credit is owed to the peer. */
    public void reposted(int receives) {
        owed += receives;
    }

    /** {@code credits} of what we owe the peer are taken back unsent (our shared pool withdrew them). */
    public void withdrawOwed(int credits) {
        if (credits < 0 || credits > owed) {
            throw new IllegalArgumentException("withdrawing " + credits + " of " + owed + " owed credits");
        }
        owed -= credits;
    }

    /** With false, credit is kept back (back-pressure on the peer); nothing is returned until true again. */
    public void setReturning(boolean returning) {
        this.returning = returning;
    }

    public boolean isReturning() {
        return returning;
    }

    /** Credits the next SEND would carry back. */
    int returnable() {
        return returning ? Math.min(owed, FrameHeader.MAX_CREDITS) : 0;
    }

    /** May a data frame go now? Never on the last credit unless it returns credit. */
    public boolean maySendData() {
        return sendCredits > 1 || (sendCredits == 1 && returnable() > 0);
    }

    /** Is an explicit credit frame due (and affordable)? It always returns credit, so it may use the last one. */
    public boolean creditFrameDue() {
        return sendCredits >= 1 && returnable() >= threshold;
    }

    /** May a frame that returns credit go now (a credit frame before the threshold, e.g. on resume)? */
    public boolean mayReturnCredit() {
        return sendCredits >= 1 && returnable() > 0;
    }

    /** Spends one credit on a SEND and hands back the credits its header returns. */
    public int spend() {
        if (sendCredits < 1) {
            throw new IllegalStateException("no send credit");
        }
        int give = returnable();
        sendCredits--;
        owed -= give;
        if (peerCredits >= 0) {
            peerCredits += give; // counted before the SEND is posted: the peer cannot use it sooner
        }
        return give;
    }

    /**
     * Spends one credit on a SEND whose header has no room for returned credit (an immediate first fragment, see
     * {@link ImmediateHeader}); what is owed waits for the next SEND. Never the last credit: that one must return.
     */
    public int spendReturningNone() {
        if (sendCredits < 2) {
            throw new IllegalStateException("the last credit goes only with a SEND that returns credit");
        }
        sendCredits--;
        return 0;
    }

    public int sendCredits() {
        return sendCredits;
    }

    /**
     * Credits the peer holds for our receives now (SENDs of a batch not yet applied still counted as held), or
     * {@link Integer#MAX_VALUE} when nothing is checked (before {@link #offered}).
     */
    public int unspentByPeer() {
        return peerCredits < 0 ? Integer.MAX_VALUE : (int) Math.min(Integer.MAX_VALUE, peerCredits);
    }

    public int owed() {
        return owed;
    }

    /**
     * A receiver whose window is granted from a shared pool moves its threshold with its allocation: it must stay
     * below what the receiver holds when a one-way sender is down to its last credit, or no credit frame would go.
     */
    public void threshold(int threshold) {
        if (threshold < 1) {
            throw new IllegalArgumentException("threshold " + threshold);
        }
        this.threshold = threshold;
    }

    public int threshold() {
        return threshold;
    }
}
