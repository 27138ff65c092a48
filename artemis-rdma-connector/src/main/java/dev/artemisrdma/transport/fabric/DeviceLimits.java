package dev.artemisrdma.transport.fabric;

/** Limits of an RDMA device, as ibv_query_device reports them. */
public record DeviceLimits(int maxQpWr, int maxSge, int maxCqe, long maxMrSize, int activeMtu) {
}
