package dev.artemisrdma.verbs;

/** struct ibv_qp_cap: what a queue pair asks for, or what the device actually gave it. */
public record QueuePairCapabilities(int maxSendWr, int maxRecvWr, int maxSendSge, int maxRecvSge,
                                    int maxInlineData) {
}
