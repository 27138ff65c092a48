package dev.artemisrdma.transport.channel;

import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.SharedReceiveQueue;
import dev.artemisrdma.transport.flow.CreditWindow;
import dev.artemisrdma.transport.flow.SharedReceivePool;

/**
 * One channel's place in its completion loop's {@link SharedReceivePool}: whether it takes its receives from the
 * pool at all, the credits the pool granted it, and what each of its batches gives back (regrant, forfeit, release).
 * The pool decides the numbers; this class keeps the channel's side of the account and its credit window in step.
 *
 * <p>Owner: the channel's lock. Every method is called under it; {@link #admitted} by the loop's register, which
 * the channel's bind calls while holding it. {@link #shares} is decided before bind and never changed after.
 * {@link #pool} and {@link #toString} are read without the lock (monitoring, debugState).
 */
final class SharedReceiveMembership {

    private final TransportConfig config;
    /** The channel's credit window: what it offers the peer, and the threshold at which it returns credit. */
    private final CreditWindow credits;
    private volatile boolean shares;
    /** The peer answers recalls, so its window may grow beyond the minimum (decided with {@link #shares}). */
    private volatile boolean grows;
    private SharedReceivePool pool;
    private SharedReceivePool.Allocation allocation;
    /**
     * The pool while the channel holds credits there, else null: {@link #pool} as monitoring reads it, without the
     * lock. Written with {@link #allocation}, at admission and release only.
     */
    private volatile SharedReceivePool memberOf;

    SharedReceiveMembership(TransportConfig config, CreditWindow credits) {
        this.config = config;
        this.credits = credits;
    }

    /**
     * Takes receives from the loop's pool instead of posting its own: before bind, on the passive side, for a peer
     * that accepts credit growth. Offers the pool's guaranteed minimum as initial credits; with {@code grows} (the
     * peer answers recalls) a window that may grow, else one fixed at the minimum: a window the pool could never ask
     * back would be the peer's for good.
     */
    void share(boolean grows) {
        this.grows = grows;
        shares = true;
        credits.offered(TransportConfig.SHARED_MIN_CREDITS); // what the handshake offers when shared
        // a one-way sender at its last credit leaves us holding allocation - 1 owed credits: the threshold must not
        // exceed that, starting from the minimum
        credits.threshold(config.sharedCreditThreshold(TransportConfig.SHARED_MIN_CREDITS));
    }

    /** Whether the channel takes its receives from the pool (decided before bind). */
    boolean shares() {
        return shares;
    }

    /** Whether its window on the pool may grow beyond the minimum (its peer answers recalls). */
    boolean grows() {
        return grows;
    }

    /** The most credits the handshake tells the peer it may be granted on the pool. */
    int maxCredits() {
        return grows ? config.sharedMaxCredits() : TransportConfig.SHARED_MIN_CREDITS;
    }

    /** Why the pool wants the channel failed (it kept more than its fair share after recalls), or null. */
    String evicted() {
        return allocation == null ? null : allocation.evicted();
    }

    /** The loop admitted the channel to its pool with {@code allocation}. */
    void admitted(SharedReceivePool pool, SharedReceivePool.Allocation allocation) {
        this.pool = pool;
        this.allocation = allocation;
        memberOf = pool;
    }

    /** Whether the channel holds credits in a pool now (admitted and not released). */
    boolean isMember() {
        return allocation != null;
    }

    /** The pool the channel holds credits in, or null; any thread, without the lock (a volatile read). */
    SharedReceivePool pool() {
        return memberOf;
    }

    /** The queue its queue pair takes receives from (admitted channels only). */
    SharedReceiveQueue queue() {
        return pool.queue();
    }

    /** Whether a recall down to {@code keep} asks anything of this channel: its window grew beyond it. */
    boolean holdsMoreThan(int keep) {
        return allocation != null && allocation.credits() > keep;
    }

    /**
     * Before a recall down to {@code keep}: takes back the credits granted beyond {@code keep} that we still owe the
     * peer (not yet sent to it). A peer that went quiet just after the pool regranted what it spent holds only what
     * it was sent: asked to give back what it holds beyond {@code keep}, it could give back none of these, and the
     * pool would judge it a hog for credits that never left this side (the lab's burst test met exactly that with
     * honest clients: a credit frame goes only once the owed credits reach the threshold). Returns how many.
     */
    int withdrawOwed(int keep) {
        if (allocation == null) {
            return 0;
        }
        int n = Math.min(credits.owed(), allocation.credits() - Math.max(keep, pool.minimum()));
        if (n <= 0) {
            return 0;
        }
        pool.withdraw(allocation, n);
        credits.withdrawOwed(n);
        credits.threshold(config.sharedCreditThreshold(allocation.credits()));
        return n;
    }

    /**
     * What the pool gives back for the receives the peer consumed in one batch (their slots are reposted already),
     * the credits it was asked for and those it gave back. A channel tearing down forfeits what it consumed. Returns
     * a protocol error when the peer sent more than its credits (it would take receives promised to others), else
     * null.
     */
    FabricException settleBatch(int consumed, boolean wanted, int released, boolean tearingDown) {
        if (tearingDown) {
            pool.forfeit(allocation, consumed);
            return null;
        }
        if (consumed == 0 && !wanted && released == 0) {
            return null;
        }
        int granted = pool.regrant(allocation, consumed, wanted, credits.owed(), released);
        if (granted < 0) {
            return new FabricException("protocol error: the peer sent " + consumed + " SENDs and gave back "
                    + released + " credits with fewer credits granted (it would take receives promised to other "
                    + "connections)");
        }
        credits.reposted(granted);
        credits.threshold(config.sharedCreditThreshold(allocation.credits()));
        return null;
    }

    /**
     * Gives the credits back to the pool: once the queue pair is destroyed (no SEND can take a receive now), or when
     * the bind that admitted the channel failed.
     */
    void release() {
        if (allocation != null) {
            pool.release(allocation);
            allocation = null;
            memberOf = null;
        }
    }

    @Override
    public String toString() {
        SharedReceivePool.Allocation a = allocation; // once: debugState reads this without the lock
        return a == null ? (shares ? "shared (not admitted)" : "own receives") : "shared=" + a.credits();
    }
}
