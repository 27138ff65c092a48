package dev.artemisrdma.verbs;

/** enum ibv_event_type (verbs.h), with what the event's element union holds for each. */
public enum IbvEventType {
    CQ_ERR(Element.CQ),
    QP_FATAL(Element.QP),
    QP_REQ_ERR(Element.QP),
    QP_ACCESS_ERR(Element.QP),
    COMM_EST(Element.QP),
    SQ_DRAINED(Element.QP),
    PATH_MIG(Element.QP),
    PATH_MIG_ERR(Element.QP),
    DEVICE_FATAL(Element.NONE),
    PORT_ACTIVE(Element.PORT),
    PORT_ERR(Element.PORT),
    LID_CHANGE(Element.PORT),
    PKEY_CHANGE(Element.PORT),
    SM_CHANGE(Element.PORT),
    SRQ_ERR(Element.SRQ),
    SRQ_LIMIT_REACHED(Element.SRQ),
    QP_LAST_WQE_REACHED(Element.QP),
    CLIENT_REREGISTER(Element.PORT),
    GID_CHANGE(Element.PORT),
    WQ_FATAL(Element.NONE),
    /** A value this binding does not know (a newer rdma-core). */
    UNKNOWN(Element.NONE);

    /** Which member of {@code ibv_async_event.element} the event fills. */
    enum Element { QP, CQ, SRQ, PORT, NONE }

    private static final IbvEventType[] BY_VALUE = values();

    private final Element element;

    IbvEventType(Element element) {
        this.element = element;
    }

    Element element() {
        return element;
    }

    public static IbvEventType of(int value) {
        return value >= 0 && value < BY_VALUE.length - 1 ? BY_VALUE[value] : UNKNOWN;
    }

    /** The C name, as operators find it in verbs.h and in logs of other tools. */
    public String cName() {
        return "IBV_EVENT_" + name();
    }
}
