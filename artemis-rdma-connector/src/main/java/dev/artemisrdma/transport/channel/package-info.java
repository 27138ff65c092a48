/**
 * One channel: {@link dev.artemisrdma.transport.channel.RdmaChannelImpl} implements
 * {@code transport.api}'s {@code RdmaChannel} and wires its parts, each with one job under the channel's lock or on
 * its loop's thread as each says: the writers' calls ({@code WritePath}), what the completion loop calls
 * ({@code LoopSide}, {@code transport.loop}'s {@code LoopChannel}), the queue pair's set-up ({@code QueuePairSetup})
 * and what the loop makes of its outcome ({@code SetupOutcome}), the calls into the application's handler
 * ({@code HandlerCalls}), what monitoring reads ({@code PublishedMeasures}) (each of these a {@code ChannelPart} of
 * one core, logging in {@code ChannelLog}), the handler, made once ({@code HandlerSlot}), the state machine
 * ({@code ChannelLifecycle}, {@code ChannelState}), what other threads ask of the loop ({@code ChannelCommands}), what
 * it registered and where it is polled ({@code ChannelResources}), the send side ({@code SendSide} with its
 * {@code Outbox} and {@code SendRing}), the receive side ({@code ReceiveSide}), its share of a shared receive pool
 * ({@code SharedReceiveMembership}), and the deadline of an accepted handshake ({@code HandshakeDeadline}).
 *
 * <p>Why here: a channel uses every layer below (wire formats, credits and memory, a completion loop, statistics,
 * configuration) and is made by the transport above, which it sees only as
 * {@link dev.artemisrdma.transport.channel.ChannelHost}: the channel never imports the transport's package.
 */
package dev.artemisrdma.transport.channel;
