package dev.artemisrdma.transport.fabric;

/**
 * Limits of an RDMA device, as ibv_query_device reports them, and what the transport must know before it asks for
 * more than the minimum: whether the device has shared receive queues, how many bytes a SEND may carry inline, and
 * which transport (InfiniBand and RoCE, iWARP, or one without reliable-connected queue pairs) it speaks.
 *
 * @param maxSrq        shared receive queues the device supports; 0: none (Intel E810 in both modes)
 * @param maxSrqWr      receives one shared receive queue may hold
 * @param maxInlineData the most inline bytes a reliable-connected queue pair on this device was found to accept, or
 *                      {@link #INLINE_UNKNOWN} where nobody asked (providers do not report it in ibv_query_device: a
 *                      probe with throw-away queue pairs finds it, see the verbs layer's {@code InlineProbe})
 */
public record DeviceLimits(int maxQpWr, int maxSge, int maxCqe, long maxMrSize, int activeMtu, int maxSrq,
                           int maxSrqWr, int maxInlineData, DeviceTransport transport) {

    /** {@link #maxInlineData} when the device's inline limit is not known: a queue pair's create finds it. */
    public static final int INLINE_UNKNOWN = -1;

    public DeviceLimits {
        if (transport == null) {
            throw new IllegalArgumentException("a device's transport must be named");
        }
    }

    public boolean hasSharedReceiveQueues() {
        return maxSrq > 0 && maxSrqWr > 0;
    }
}
