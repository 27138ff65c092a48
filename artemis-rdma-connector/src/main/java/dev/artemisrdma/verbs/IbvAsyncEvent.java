package dev.artemisrdma.verbs;

/**
 * One verbs asynchronous event, copied out of {@code struct ibv_async_event} before it was acknowledged: the queue
 * pair number for queue pair events, the port for port events, the SRQ's address for SRQ events and the completion
 * queue's address for CQ events (0 otherwise).
 */
public record IbvAsyncEvent(RdmaDevice device, IbvEventType type, int rawType, int portNumber, int qpNumber,
                            long srq, long cq) {

    @Override
    public String toString() {
        String what = type == IbvEventType.UNKNOWN ? "ibv_event_type " + rawType : type.cName();
        return switch (type.element()) {
            case PORT -> what + " on " + device.name() + " port " + portNumber;
            case QP -> what + " on " + device.name() + " qp " + qpNumber;
            case SRQ -> what + " on " + device.name() + " srq 0x" + Long.toHexString(srq);
            case CQ -> what + " on " + device.name() + " cq 0x" + Long.toHexString(cq);
            default -> what + " on " + device.name();
        };
    }
}
