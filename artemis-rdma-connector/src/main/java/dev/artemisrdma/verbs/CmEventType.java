package dev.artemisrdma.verbs;

/** enum rdma_cm_event_type. */
public enum CmEventType {
    ADDR_RESOLVED(0), ADDR_ERROR(1), ROUTE_RESOLVED(2), ROUTE_ERROR(3), CONNECT_REQUEST(4), CONNECT_RESPONSE(5),
    CONNECT_ERROR(6), UNREACHABLE(7), REJECTED(8), ESTABLISHED(9), DISCONNECTED(10), DEVICE_REMOVAL(11),
    MULTICAST_JOIN(12), MULTICAST_ERROR(13), ADDR_CHANGE(14), TIMEWAIT_EXIT(15), ADDRINFO_RESOLVED(16),
    ADDRINFO_ERROR(17), USER(18), INTERNAL(19), UNKNOWN(-1);

    private final int code;

    CmEventType(int code) {
        this.code = code;
    }

    public int code() {
        return code;
    }

    public static CmEventType of(int code) {
        for (CmEventType type : values()) {
            if (type.code == code) {
                return type;
            }
        }
        return UNKNOWN;
    }

    /** The C name, e.g. RDMA_CM_EVENT_REJECTED. */
    public String cName() {
        return "RDMA_CM_EVENT_" + name();
    }
}
