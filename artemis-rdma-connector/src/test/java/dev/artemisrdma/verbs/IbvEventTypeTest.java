package dev.artemisrdma.verbs;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** The event types the transport acts on decode from the values verbs.h gives them (checked there by AbiOffsetsTest). */
class IbvEventTypeTest {

    @Test
    void theValuesTheTransportActsOnDecodeToTheirTypes() {
        assertEquals(IbvEventType.QP_FATAL, IbvEventType.of(Abi.EVENT_QP_FATAL));
        assertEquals(IbvEventType.QP_REQ_ERR, IbvEventType.of(Abi.EVENT_QP_REQ_ERR));
        assertEquals(IbvEventType.QP_ACCESS_ERR, IbvEventType.of(Abi.EVENT_QP_ACCESS_ERR));
        assertEquals(IbvEventType.DEVICE_FATAL, IbvEventType.of(Abi.EVENT_DEVICE_FATAL));
        assertEquals(IbvEventType.PORT_ACTIVE, IbvEventType.of(Abi.EVENT_PORT_ACTIVE));
        assertEquals(IbvEventType.PORT_ERR, IbvEventType.of(Abi.EVENT_PORT_ERR));
        assertEquals(IbvEventType.SRQ_LIMIT_REACHED, IbvEventType.of(Abi.EVENT_SRQ_LIMIT_REACHED));
        assertEquals(IbvEventType.WQ_FATAL, IbvEventType.of(Abi.EVENT_WQ_FATAL));
        assertEquals(IbvEventType.UNKNOWN, IbvEventType.of(Abi.EVENT_WQ_FATAL + 1));
        assertEquals(IbvEventType.UNKNOWN, IbvEventType.of(-1));
        assertEquals("IBV_EVENT_PORT_ERR", IbvEventType.PORT_ERR.cName());
    }
}
