/**
 * The completion loops: {@link dev.artemisrdma.transport.loop.CompletionLoop} polls one completion queue for many
 * channels on its own thread, maps each completion back to its channel
 * ({@link dev.artemisrdma.transport.loop.QueuePairTable}, work request ids), and spins or blocks as pays
 * ({@link dev.artemisrdma.transport.loop.SpinPolicy} per loop, {@link dev.artemisrdma.transport.loop.SpinBudget}
 * per transport).
 *
 * <p>Why below the channel: the loop drives a channel on every completion and the channel calls the loop to register
 * and to hand it flushes. The loop knows a channel only as {@link dev.artemisrdma.transport.loop.LoopChannel}, which
 * is defined here and implemented in {@code transport.channel}; so the loop imports nothing above it (flow for its
 * shared receive pool, wire for work request ids, stats, config), and the channel imports the loop.
 */
package dev.artemisrdma.transport.loop;
