/**
 * What a user of the transport holds of a connection: {@link dev.artemisrdma.transport.api.RdmaChannel}, the
 * {@link dev.artemisrdma.transport.api.ChannelHandler} that receives its events, the
 * {@link dev.artemisrdma.transport.api.SendBuffer}s a frame is encoded into, and the exceptions a write throws.
 *
 * <p>Why a package of its own, and this low: the layers that implement these types (the channel, the send buffer
 * pool in {@code transport.flow}) must import them, and {@code dev.artemisrdma.transport} above imports those
 * layers, so the types cannot live there without a cycle. They import only the fabric's exception and
 * {@code transport.stats}: a channel is a {@code ChannelMeasures}, so monitoring reads it without a downcast.
 */
package dev.artemisrdma.transport.api;
