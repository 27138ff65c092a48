/**
 * What monitoring reads: a channel's frame counters ({@link dev.artemisrdma.transport.stats.TransportStats}), its
 * completion and error counters ({@link dev.artemisrdma.transport.stats.ChannelCounters}), totals over a group of
 * channels ({@link dev.artemisrdma.transport.stats.ChannelGroupStats}) and over a transport's completion loops
 * ({@link dev.artemisrdma.transport.stats.LoopStats}).
 *
 * <p>Why at the bottom: statistics are read through interfaces. Every channel is a
 * {@link dev.artemisrdma.transport.stats.ChannelMeasures}, and shared memory counted once per group is a
 * {@code ChannelMeasures.SharedPool}; so this package names no channel, loop or pool class, and the layers that
 * count implement or fill what it defines. It imports only the fabric (for completion statuses).
 */
package dev.artemisrdma.transport.stats;
