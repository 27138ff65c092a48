/**
 * The wire protocol over any {@link dev.artemisrdma.transport.fabric.Fabric}: reliable, ordered, message-preserving
 * channels with receive credits, so that a SEND never meets an empty receive queue. No Artemis or JNA types.
 *
 * <p>This package is the top of the transport and its entry point: {@link dev.artemisrdma.transport.RdmaTransport}
 * (per device: send buffer pools, completion loops, the channels it made, and its listeners, {@code RdmaServer}
 * with {@code ListenerStats}), and {@code BoundedClose}, which closes many channels within a bound. It is the
 * composition root, so it imports every package beneath it and none imports it.
 *
 * <p>Layout, top first, each package importing only those below it ({@code PackageLayersTest} fails on an import
 * that runs upward):
 * <ol>
 * <li>{@code transport.tls}: TLS over any channel ({@code TlsChannel}, the JDK's engine over frames); it knows a channel
 * only through the API, so it sits beside the channel, not on it.</li>
 * <li>{@code transport.channel}: one channel's parts, {@code RdmaChannelImpl} wiring its lifecycle, resources, send
 * side and receive side; it sees the transport only as {@code ChannelHost}.</li>
 * <li>{@code transport.loop}: the completion loops, which know a channel only as {@code LoopChannel}.</li>
 * <li>{@code transport.flow}: credits and the registered memory they stand for (send buffer pools, shared receive
 * pools, reassembly under a budget).</li>
 * <li>{@code transport.wire}: the bit layouts: frame header, immediate data, packed frames, handshake, work request
 * ids.</li>
 * <li>{@code transport.api}: what a user of a channel holds ({@code RdmaChannel}, {@code ChannelHandler},
 * {@code SendBuffer}, the exceptions a write throws). Below the implementation because the implementation
 * implements it; above statistics because every channel is measurable.</li>
 * <li>{@code transport.config} ({@code TransportConfig}, read by every layer) and {@code transport.stats} (what
 * monitoring reads, through interfaces: no statistic needs a channel class).</li>
 * <li>{@code transport.fabric}, the service provider interface (the only thing the protocol knows of RDMA), and
 * {@code transport.verbs}, its implementation over libibverbs/librdmacm, which imports only the fabric.</li>
 * </ol>
 * The loop and the channel call each other on every completion; the cycle is broken by interfaces
 * ({@code LoopChannel} below, implemented above), not by a shared package.
 */
package dev.artemisrdma.transport;
