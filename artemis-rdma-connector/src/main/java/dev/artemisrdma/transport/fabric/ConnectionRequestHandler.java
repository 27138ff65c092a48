package dev.artemisrdma.transport.fabric;

/** Decides on each incoming connection request. Called on the fabric's connection-manager thread. */
@FunctionalInterface
public interface ConnectionRequestHandler {

    /** Must end in {@link ConnectionRequest#accept} or {@link ConnectionRequest#reject}; exceptions reject. */
    void onConnectionRequest(ConnectionRequest request);
}
