package dev.artemisrdma.verbs;

/**
 * A connection-manager event, copied out of native memory before it was acknowledged (acking frees the private
 * data), so it can be handled at leisure.
 *
 * @param id        address of the rdma_cm_id the event is about (for CONNECT_REQUEST: a new id we now own)
 * @param listenId  address of the listening id for CONNECT_REQUEST, else 0
 * @param status    the event's status (negative errno for errors; for REJECTED the transport's reject reason)
 * @param privateData the peer's private data, never null
 */
public record CmEvent(CmEventType type, long id, long listenId, int status, byte[] privateData) {

    @Override
    public String toString() {
        return type.cName() + "(status " + status + ", " + privateData.length + " bytes private data)";
    }
}
