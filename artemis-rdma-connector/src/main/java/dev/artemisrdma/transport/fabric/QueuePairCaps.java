package dev.artemisrdma.transport.fabric;

/** The capabilities a queue pair actually got (devices round requests up). */
public record QueuePairCaps(int maxSendWr, int maxRecvWr, int maxSendSge, int maxRecvSge, int maxInlineData) {
}
