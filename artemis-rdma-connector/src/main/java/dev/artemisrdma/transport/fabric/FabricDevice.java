package dev.artemisrdma.transport.fabric;

/** One RDMA device (its protection domain): memory and completion queues are created per device. */
public interface FabricDevice {

    String name();

    /** The device's limits and transport; never null. */
    DeviceLimits limits();

    /**
     * Whether SENDs on this device may carry immediate data (IBV_WR_SEND_WITH_IMM): InfiniBand and RoCE devices, not
     * iWARP ones, as its transport says. Without it, fragments keep their header in band whatever the peer reads.
     */
    default boolean supportsImmediateData() {
        return limits().transport().sendsImmediateData();
    }

    /**
     * Allocates a page-aligned slab of {@code bytes} and registers it for local write only (no remote keys are
     * ever handed out). The slab lives until {@link RegisteredMemory#close()}.
     */
    RegisteredMemory register(int bytes) throws FabricException;

    /** A completion queue with its own completion channel, able to hold {@code entries} completions. */
    CompletionQueue createCompletionQueue(int entries) throws FabricException;

    /**
     * A shared receive queue able to hold {@code maxReceives} posted receives of one scatter-gather entry each.
     * The default refuses: a device or fabric without SRQ support (connections then keep their own queues).
     */
    default SharedReceiveQueue createSharedReceiveQueue(int maxReceives) throws FabricException {
        throw new FabricException("device " + name() + " does not support shared receive queues (ibv_create_srq);"
                + " set sharedReceiveQueue=false");
    }
}
