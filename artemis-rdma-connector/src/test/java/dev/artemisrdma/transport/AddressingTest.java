package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.Addressing;
import dev.artemisrdma.transport.fabric.AddressingException;
import dev.artemisrdma.transport.fabric.ConnectOptions;

/**
 * The device=, tos= and ackTimeout= keys: parsing, validation, and what a fabric does with a device it does not have.
 */
class AddressingTest {

    @Test
    void unsetTheRouteChoosesTheDeviceAndTheKernelTheTypeOfService() {
        TransportConfig c = TransportConfig.defaults();
        assertNull(c.device());
        assertEquals(Addressing.DEFAULT_TOS, c.tos());
        assertEquals(Addressing.ANY, c.addressing());
        assertFalse(c.addressing().hasDevice());
        assertFalse(c.addressing().hasTos());
    }

    @Test
    void deviceAndTosComeFromUrlParameters() {
        TransportConfig c = TransportConfig.fromMap(Map.of("device", " rxe0 ", "tos", "106"));
        assertEquals("rxe0", c.device());
        assertEquals(106, c.tos());
        assertEquals(new Addressing("rxe0", 106), c.addressing());
        assertEquals(c, c.toBuilder().build(), "toBuilder keeps device and tos");
        assertEquals(0, TransportConfig.fromMap(Map.of("tos", 0)).tos());
        assertEquals(255, TransportConfig.fromMap(Map.of("tos", "255")).tos());
        assertNull(TransportConfig.fromMap(Map.of("device", "")).device(),
                "an empty value (an unset property placeholder) leaves the device to the route");
    }

    @Test
    void tosOutsideAByteIsRefusedNamingTheKey() {
        for (Object bad : new Object[] {"256", -1, "-5", 1000}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> TransportConfig.fromMap(Map.of("tos", bad)));
            assertTrue(e.getMessage().startsWith("tos: must be 0..255"), e.getMessage());
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("tos", "af41")));
        assertTrue(e.getMessage().startsWith("tos: not an integer"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> TransportConfig.builder().tos(300).build());
    }

    @Test
    void aDeviceNameThatCannotBeOneIsRefused() {
        for (String bad : new String[] {"rxe 0", "a/b", "x".repeat(64)}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> TransportConfig.fromMap(Map.of("device", bad)));
            assertTrue(e.getMessage().startsWith("device: not an RDMA device name"), e.getMessage());
        }
    }

    @Test
    void anUnknownDeviceIsRefusedListingTheDevicesPresent() throws Exception {
        try (FakeFabric fabric = new FakeFabric()) {
            AddressingException e = assertThrows(AddressingException.class, () -> fabric.listen(
                    Peers.serverAddress(), new Addressing("rxe9", 32), request -> request.reject(null)));
            assertTrue(e.getMessage().contains("no RDMA device named 'rxe9'"), e.getMessage());
            assertTrue(e.getMessage().contains("devices present: [fake0]"), e.getMessage());

            RdmaTransport client = RdmaTransport.create(fabric, TransportConfig.builder().device("mlx5_0").build());
            e = assertThrows(AddressingException.class,
                    () -> client.connect(Peers.serverAddress(), new Peers.Recorder()));
            assertTrue(e.getMessage().contains("'mlx5_0'") && e.getMessage().contains("[fake0]"), e.getMessage());
            assertEquals(0, client.channelCount(), "the refused connect left no channel behind");
            client.close();
            fabric.assertNoViolations();
        }
    }

    @Test
    void endpointsOnTheNamedDeviceWithATypeOfServiceCarryFrames() throws Exception {
        TransportConfig config = TransportConfig.builder().device("fake0").tos(46 << 2).build();
        try (FakeFabric fabric = new FakeFabric();
             RdmaTransport server = RdmaTransport.create(fabric, config);
             RdmaTransport client = RdmaTransport.create(fabric, config)) {
            Peers.Recorder atServer = new Peers.Recorder();
            RdmaServer listening = server.listen(Peers.serverAddress(), ch -> atServer);
            RdmaChannel channel = client.connect(listening.localAddress(), new Peers.Recorder());
            channel.write(ByteBuffer.wrap(Peers.payload(1, 0, 300)), true);
            Peers.await("the frame at the server", 5000, () -> atServer.count() == 1);
            assertEquals(300, atServer.sizes.get(0));
            channel.close();
        }
    }

    @Test
    void addressesAreWrittenAsUrlsWriteThem() {
        assertEquals("10.77.0.1:61700", RdmaTransport.describe(new InetSocketAddress("10.77.0.1", 61700)));
        assertEquals("[fd77:0:0:0:0:0:0:1]:61700", RdmaTransport.describe(new InetSocketAddress("fd77::1", 61700)));
    }

    @Test
    void connectOptionsDefaultToAnyDevice() {
        assertEquals(Addressing.ANY, new ConnectOptions(null, 7, 7, Duration.ofSeconds(1)).addressing());
        assertEquals(Addressing.ANY, new ConnectOptions(null, 7, 7, Duration.ofSeconds(1), null).addressing());
    }

    @Test
    void theTwoArgumentAddressingKeepsTheDefaultAckTimeoutAndTheBudgetFollowsTheRetryCount() {
        assertEquals(Addressing.DEFAULT_ACK_TIMEOUT, Addressing.ANY.ackTimeout());
        assertEquals(new Addressing("rxe0", 106, 17), new Addressing("rxe0", 106));
        Addressing a = new Addressing(null, Addressing.DEFAULT_TOS, 10); // 4.096 us x 1024 = 4,194,304 ns
        assertEquals(Duration.ofNanos(4_194_304L), a.ackTimeoutDuration());
        assertEquals(Duration.ofNanos(4_194_304L), a.retryBudget(0));
        assertEquals(Duration.ofNanos(8 * 4_194_304L), a.retryBudget(Addressing.ACCEPTED_RETRY_COUNT));
        assertThrows(IllegalArgumentException.class, () -> a.retryBudget(8));
        assertEquals("device rxe0, tos 106, ackTimeout 12", new Addressing("rxe0", 106, 12).toString());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new Addressing(null, Addressing.DEFAULT_TOS, 0));
        assertTrue(e.getMessage().startsWith("ackTimeout: must be 1..31"), e.getMessage());
    }
}
