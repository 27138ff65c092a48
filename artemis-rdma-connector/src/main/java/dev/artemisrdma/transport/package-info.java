/**
 * The wire protocol over any {@link dev.artemisrdma.transport.fabric.Fabric}: reliable, ordered, message-preserving
 * channels with receive credits, so that a SEND never meets an empty receive queue. No Artemis or JNA types.
 *
 * <p>Layout. {@code transport.fabric} is the service provider interface below (the only thing the protocol knows of
 * RDMA), {@code transport.verbs} its implementation over libibverbs/librdmacm. This package holds the protocol
 * itself: {@link dev.artemisrdma.transport.RdmaTransport} (per device: send buffer pools and completion loops),
 * the completion loops ({@code CompletionLoop}, {@code SpinPolicy}, {@code SpinBudget}), one channel's parts
 * ({@code RdmaChannelImpl} wiring {@code ChannelLifecycle}, {@code ChannelResources}, {@code SendSide},
 * {@code ReceiveSide} and {@code SharedReceiveMembership}), the wire format ({@code FrameHeader},
 * {@code ImmediateHeader}, {@code Handshake}, {@code PackedFrames}), flow control and memory ({@code CreditWindow},
 * {@code SendRing}, {@code BufferPool}, {@code Reassembler}, {@code SharedReceivePool}) and statistics. The loop and
 * the channel call each other on every completion, package-private on purpose: splitting them into packages of their
 * own waits for the interfaces that let each import only downward.
 */
package dev.artemisrdma.transport;
