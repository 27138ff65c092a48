package dev.artemisrdma.transport.fabric;

import java.net.InetSocketAddress;

/**
 * The RDMA operations the transport protocol needs, and nothing more: connection management over rdma_cm,
 * registered memory, queue pairs and completion queues. It carries no JNA or Artemis types, so the protocol
 * can be tested against an in-memory fake that enforces the verbs rules, and run on the real binding
 * ({@code dev.artemisrdma.transport.verbs.VerbsFabric}) unchanged.
 *
 * <p>Threading: connection requests and connection events are delivered on the fabric's own connection-manager
 * thread; data-path calls ({@link QueuePair#postSend}, {@link CompletionQueue#poll}) are made by the caller's
 * threads and must not be made concurrently on the same queue pair or completion queue.
 */
public interface Fabric extends AutoCloseable {

    /**
     * Listens for connections on a local address. Each request is handed to {@code handler} on the fabric's
     * connection-manager thread, which must accept or reject it.
     */
    default FabricListener listen(InetSocketAddress bindAddress, ConnectionRequestHandler handler)
            throws FabricException {
        return listen(bindAddress, Addressing.ANY, handler);
    }

    /**
     * Listens as {@link #listen(InetSocketAddress, ConnectionRequestHandler)}, checking {@code addressing}'s device
     * and setting its type of service. A specific bind address must be on the named device; a wildcard
     * ({@code 0.0.0.0}, {@code ::}) listens on every device (the transport then accepts only connections that arrive
     * on the named one).
     *
     * @throws AddressingException for an unknown device, or a bind address that is not on the named device
     */
    FabricListener listen(InetSocketAddress bindAddress, Addressing addressing, ConnectionRequestHandler handler)
            throws FabricException;

    /**
     * Connects to a listening peer and blocks until the connection is established, refused or the timeout
     * expires. The queue pair is created by {@code setup} once the route (and so the device) is known, and its
     * receives are posted before the handshake, so the peer can send the moment it sees the connection.
     */
    QueuePair connect(InetSocketAddress remote, ConnectionSetup setup, ConnectOptions options,
                      QueuePairEvents events) throws FabricException;

    /**
     * Adds one who hears of devices that went away ({@link DeviceListener}): each transport on this fabric. A
     * fabric whose devices cannot go away may ignore it.
     */
    default void addDeviceListener(DeviceListener listener) {
    }

    /** Removes a device listener (its transport closed: it holds nothing on any device any more). */
    default void removeDeviceListener(DeviceListener listener) {
    }

    /**
     * {@code listener} released everything it created on a lost device (completion queues, memory): once every
     * listener has, the fabric frees the device. Idempotent.
     */
    default void releaseDevice(FabricDevice device, DeviceListener listener) {
    }

    /** Receives shared receive queue limit events (IBV_EVENT_SRQ_LIMIT_REACHED); nothing else is done with them. */
    default void onSrqLimit(java.util.function.Consumer<DeviceEvent> hook) {
    }

    /** Releases everything the fabric owns: listeners, connections still open, devices. */
    @Override
    void close();
}
