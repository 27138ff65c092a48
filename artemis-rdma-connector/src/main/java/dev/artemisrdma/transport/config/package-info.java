/**
 * {@link dev.artemisrdma.transport.config.TransportConfig}: every tuning key, its default, its bounds and the sizes
 * derived from them (a connection's registration, its completion queue entries), validated once so the layers above
 * can trust them.
 *
 * <p>Why a package of its own, at the bottom: every layer reads the configuration (the wire checks a peer's
 * handshake against its bounds, the loops size their queues, the channel its memory), so it may import nothing
 * above the fabric. Layout constants that the sizes depend on, such as the send header stride, live here for the
 * same reason.
 */
package dev.artemisrdma.transport.config;
