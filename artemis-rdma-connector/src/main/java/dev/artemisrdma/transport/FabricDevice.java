package dev.artemisrdma.transport;

/** One RDMA device (its protection domain): memory and completion queues are created per device. */
public interface FabricDevice {

    String name();

    DeviceLimits limits();

    /**
     * Allocates a page-aligned slab of {@code bytes} and registers it for local write only (no remote keys are
     * ever handed out). The slab lives until {@link RegisteredMemory#close()}.
     */
    RegisteredMemory register(int bytes) throws FabricException;

    /** A completion queue with its own completion channel, able to hold {@code entries} completions. */
    CompletionQueue createCompletionQueue(int entries) throws FabricException;
}
