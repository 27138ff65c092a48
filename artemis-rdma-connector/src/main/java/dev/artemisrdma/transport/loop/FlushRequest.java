package dev.artemisrdma.transport.loop;

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One channel's request that its completion loop post what the channel's writers queued, left while the loop was
 * handling a batch ({@link CompletionLoop#takeFlush}). Made once with the channel and reused, so a hand-off allocates
 * nothing (a queue node per hand-off did). It is in the loop's stack at most once: the writer that pushes it marks it
 * {@link #queued} first, and the loop clears the mark before it posts; a writer that finds it marked leaves its
 * frames to that post, which takes the channel's lock after the writer lets it go.
 *
 * <p>Threads: writers push it (holding their channel's lock); the loop thread pops it. {@link #next} is the stack's
 * link: written by the pushing writer before the compare-and-set that publishes it, read by the loop thread after the
 * exchange that took the stack, and cleared by the loop before it clears the mark.
 */
public final class FlushRequest {

    final LoopChannel channel;
    final AtomicBoolean queued = new AtomicBoolean();
    FlushRequest next;

    public FlushRequest(LoopChannel channel) {
        this.channel = channel;
    }

    @Override
    public String toString() {
        return "FlushRequest[" + channel.id() + (queued.get() ? " queued]" : "]");
    }
}
