package dev.artemisrdma.transport.fabric;

/**
 * Hears that a device went away (removed, or its fabric cannot use it any more). The owner of what was created on
 * it (the transport: completion queues, registered memory) releases those once the device's connections are gone,
 * then calls {@link Fabric#releaseDevice}; once every listener has, the fabric frees the device itself.
 */
@FunctionalInterface
public interface DeviceListener {

    /** Called on a fabric thread; must not block. */
    void deviceLost(FabricDevice device, String reason);
}
