package dev.artemisrdma.transport.fabric;

/**
 * A device-level event of a fabric (on verbs: an ibv_async_event), in the transport's terms. {@code name} is the
 * fabric's own name for it (e.g. {@code IBV_EVENT_PORT_ERR}) so reasons and logs carry it; {@code port} is set for
 * port events, {@code qpNumber} for queue pair events (-1 otherwise).
 */
public record DeviceEvent(Kind kind, String name, String device, int port, int qpNumber) {

    /** What the transport does with an event of each kind. */
    public enum Kind {
        /**
         * A port went down: connections on that device and port fail if it is still down when their retry budget
         * ((retryCount + 1) x 4.096 us x 2^ackTimeout) has passed; a port back before that costs none.
         */
        PORT_DOWN,
        /** A port came up: ends its outage (connections that rode it out go on); listeners waiting retry. */
        PORT_UP,
        /** The device is unusable: every connection on it fails. */
        DEVICE_FATAL,
        /** One queue pair went to error (QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR): its connection fails. */
        QUEUE_PAIR_ERROR,
        /** A shared receive queue fell below its limit: forwarded to the fabric's SRQ limit hook. */
        SRQ_LIMIT,
        /** Anything else: logged at debug. */
        OTHER
    }

    public static DeviceEvent port(Kind kind, String name, String device, int port) {
        return new DeviceEvent(kind, name, device, port, -1);
    }

    public static DeviceEvent queuePair(String name, String device, int qpNumber) {
        return new DeviceEvent(Kind.QUEUE_PAIR_ERROR, name, device, 0, qpNumber);
    }

    @Override
    public String toString() {
        return name + " on RDMA device " + device + (port > 0 ? " port " + port : "")
                + (qpNumber >= 0 ? " queue pair " + qpNumber : "");
    }
}
