package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;

import org.apache.activemq.artemis.spi.core.remoting.Connector;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Transports are shared by what the parameters mean, not by how they are written: a key spelled out with its
 * default, or a size or duration in another spelling, is the same configuration and gets the same transport.
 */
class TransportSharingTest {

    @BeforeAll
    static void runtime() {
        TestRuntime.install();
    }

    private static Map<String, Object> params(Object... keyValues) {
        Map<String, Object> params = new HashMap<>(Map.of("host", "127.0.0.1", "port", 61791));
        for (int i = 0; i < keyValues.length; i += 2) {
            params.put((String) keyValues[i], keyValues[i + 1]);
        }
        return params;
    }

    @Test
    void aKeyWrittenWithItsDefaultSharesTheTransportOfTheKeyLeftOut() throws Exception {
        Map<String, Object> written = params("receiveSlots", "64", "slotSize", "16384", "connectTimeout", "10s");
        Map<String, Object> leftOut = params("slotSize", "16KiB", "connectTimeout", "PT10S");
        try (RdmaRuntime.Lease a = RdmaRuntime.acquire(
                     RdmaParameters.parse("written", written, RdmaParameters.CONNECTOR_KEYS));
             RdmaRuntime.Lease b = RdmaRuntime.acquire(
                     RdmaParameters.parse("left out", leftOut, RdmaParameters.CONNECTOR_KEYS))) {
            assertSame(a.transport(), b.transport(), "one configuration, two transports");
        }
    }

    @Test
    void connectorsConfiguredInTwoSpellingsOpenOneTransport() {
        // receiveSlots 44 is no other test's, so no transport of this configuration is open yet
        Connector first = connector(params("receiveSlots", 44));
        Connector second = connector(params("receiveSlots", "44", "creditThreshold", "11", "slotSize", "16k",
                "writeHighWaterMark", "4194304", "maxFrameSize", "64MiB", "closeTimeout", "2000",
                "sharedReceiveQueue", "true"));
        long openedBefore = RdmaRuntime.transportsOpened();
        first.start();
        second.start();
        try {
            assertTrue(first.isStarted() && second.isStarted());
            assertEquals(openedBefore + 1, RdmaRuntime.transportsOpened(),
                    "the same configuration in two spellings opened two transports");
        } finally {
            first.close();
            second.close();
        }
    }

    private static Connector connector(Map<String, Object> params) {
        return new RdmaConnectorFactory().createConnector(params, (connectionID, buffer) -> { }, null, Runnable::run,
                Runnable::run, null, null);
    }
}
