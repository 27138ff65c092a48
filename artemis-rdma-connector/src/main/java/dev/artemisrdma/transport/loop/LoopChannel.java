package dev.artemisrdma.transport.loop;

import java.nio.ByteBuffer;

import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.flow.SharedReceivePool;
import dev.artemisrdma.transport.stats.ChannelCounters;

/**
 * What a {@link CompletionLoop} drives on a channel it polls for: the completions it maps back to the channel, the
 * end of each batch, the writers' flushes left to it, its ticks, shared-pool admission and recalls, and its own death.
 * The channel implements it; the loop knows the channel only through this, so the loop depends on nothing above it.
 *
 * <p>Every method runs on the loop's thread, except {@link #sharesReceives}, {@link #sharedWindowGrows} and
 * {@link #useSharedPool}, which run in the loop's register, on the thread binding the channel (under the channel's
 * lock), and {@link #runCommands}, which a loop that is gone leaves to the asking thread.
 */
public interface LoopChannel {

    String id();

    /** The queue pair's number: a completion naming another belongs to a closed channel whose index was reused. */
    int qpNumber();

    ChannelCounters counters();

    /** Whether the channel takes its receives from the loop's shared pool (decided before it binds). */
    boolean sharesReceives();

    /** Whether its window on the pool may grow beyond the minimum (its peer answers recalls). */
    boolean sharedWindowGrows();

    /** The loop admitted the channel to its pool with {@code allocation}. */
    void useSharedPool(SharedReceivePool pool, SharedReceivePool.Allocation allocation);

    /** Marks the channel as in the current batch; true the first time in a batch. */
    boolean joinBatch();

    /** The batch was applied; the channel may join the next. */
    void leaveBatch();

    void onReceiveCompletion(int slot, int status, int byteLength, long immediate);

    void onSharedReceiveCompletion(ByteBuffer poolView, int base, int status, int byteLength, long immediate);

    void onSendCompletion(int slot, int status);

    /** Applies the batch; returns whether the channel has a deadline running. */
    boolean endOfBatch();

    /** Posts what writers left to the loop; returns whether the channel has a deadline running. */
    boolean flushLeftToLoop();

    /** The loop's shared pool needs receives back: asks the peer to keep at most {@code keep}. */
    void recall(int keep);

    /**
     * Runs what other threads asked of the channel through its {@link Mailbox} ({@code requests}: the bits it
     * defines); returns whether the channel has a deadline running. On the loop thread, or on the asking thread
     * where the loop refused the mailbox ({@link CompletionLoop#post}).
     */
    boolean runCommands(int requests);

    /** Periodic deadlines; returns whether the channel has a deadline running or work pending. */
    boolean tick(long now);

    /** The loop died, or stopped with the channel still on it: nobody polls for it any more. */
    void loopFailed(FabricException why);
}
