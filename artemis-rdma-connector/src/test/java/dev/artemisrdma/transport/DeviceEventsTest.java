package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.channel.RdmaChannelImpl;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.DeviceEvent;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.ListenerRecovery;

/**
 * Device events (verbs async events, device removal, address change) fail exactly the connections they hit, with a
 * reason naming the device, port or queue pair and the event; a lost device is released; a listener recovers.
 */
class DeviceEventsTest {

    private static TransportConfig config() {
        return TransportConfig.builder().busyPollMicros(0).receiveSlots(8).slotSize(1024)
                .connectTimeout(Duration.ofSeconds(5)).build();
    }

    private static String causeOf(Peers.Recorder side) throws Exception {
        FabricException cause = side.closed.get(5, TimeUnit.SECONDS);
        assertNotNull(cause, "a device event is a failure, not a local close");
        return cause.getMessage();
    }

    /** The channel still carries a frame both ways. */
    private static void assertWorks(RdmaChannel client, Peers.Recorder serverSide) throws Exception {
        int before = serverSide.count();
        client.write(ByteBuffer.wrap(new byte[] {7, 7, 7}), true);
        Peers.await("a frame over the surviving channel", 5000, () -> serverSide.count() == before + 1);
        assertTrue(client.isOpen());
    }

    @Test
    void portDownFailsEveryConnectionOnThatPortAndNamesDevicePortAndEvent() throws Exception {
        try (Connection c = new Connection(config(), config())) {
            c.fabric.injectDeviceEvent(DeviceEvent.port(DeviceEvent.Kind.PORT_DOWN, "IBV_EVENT_PORT_ERR", "fake0", 1));
            for (Peers.Recorder side : new Peers.Recorder[] {c.clientSide, c.serverSide}) {
                String why = causeOf(side);
                assertTrue(why.contains("port 1 of RDMA device fake0") && why.contains("IBV_EVENT_PORT_ERR"), why);
            }
        }
    }

    @Test
    void eventsOnAnotherPortOrDeviceAndPortUpFailNothing() throws Exception {
        try (Connection c = new Connection(config(), config())) {
            c.fabric.injectDeviceEvent(DeviceEvent.port(DeviceEvent.Kind.PORT_DOWN, "IBV_EVENT_PORT_ERR", "fake0", 2));
            c.fabric.injectDeviceEvent(DeviceEvent.port(DeviceEvent.Kind.PORT_DOWN, "IBV_EVENT_PORT_ERR", "other0", 1));
            c.fabric.injectDeviceEvent(new DeviceEvent(DeviceEvent.Kind.DEVICE_FATAL, "IBV_EVENT_DEVICE_FATAL",
                    "other0", 0, -1));
            c.fabric.injectDeviceEvent(DeviceEvent.port(DeviceEvent.Kind.PORT_UP, "IBV_EVENT_PORT_ACTIVE", "fake0", 1));
            c.fabric.injectDeviceEvent(new DeviceEvent(DeviceEvent.Kind.OTHER, "IBV_EVENT_GID_CHANGE", "fake0", 1, -1));
            assertWorks(c.client, c.serverSide); // the cm thread handled the events before this frame's completion
            assertFalse(c.clientSide.closed.isDone());
            assertFalse(c.serverSide.closed.isDone());
        }
    }

    @Test
    void aQueuePairErrorFailsThatConnectionOnly() throws Exception {
        try (Connection c = new Connection(config(), config())) {
            Peers.Recorder otherServerSide = new Peers.Recorder();
            CompletableFuture<RdmaChannel> accepted = new CompletableFuture<>();
            RdmaServer second = c.serverTransport.listen(new java.net.InetSocketAddress(
                    Peers.serverAddress().getAddress(), 0), ch -> {
                        accepted.complete(ch);
                        return otherServerSide;
                    });
            Peers.Recorder otherClientSide = new Peers.Recorder();
            RdmaChannel other = c.clientTransport.connect(second.localAddress(), otherClientSide);
            accepted.get(5, TimeUnit.SECONDS);
            int qpn = ((RdmaChannelImpl) c.client).qpNumber();
            c.fabric.injectDeviceEvent(DeviceEvent.queuePair("IBV_EVENT_QP_FATAL", "fake0", qpn));
            String why = causeOf(c.clientSide);
            assertTrue(why.contains("queue pair " + qpn + " on RDMA device fake0") && why.contains("IBV_EVENT_QP_FATAL"),
                    why);
            assertWorks(other, otherServerSide);
            other.close();
            second.close();
        }
    }

    @Test
    void aFatalDeviceErrorFailsEveryConnectionOnIt() throws Exception {
        try (Connection c = new Connection(config(), config())) {
            c.fabric.injectDeviceEvent(new DeviceEvent(DeviceEvent.Kind.DEVICE_FATAL, "IBV_EVENT_DEVICE_FATAL",
                    "fake0", 0, -1));
            assertTrue(causeOf(c.clientSide).contains("RDMA device fake0 failed (IBV_EVENT_DEVICE_FATAL)"));
            assertTrue(causeOf(c.serverSide).contains("IBV_EVENT_DEVICE_FATAL"));
        }
    }

    @Test
    void anSrqLimitEventGoesToTheHookAndNowhereElse() throws Exception {
        try (Connection c = new Connection(config(), config())) {
            CompletableFuture<DeviceEvent> heard = new CompletableFuture<>();
            c.fabric.onSrqLimit(heard::complete);
            DeviceEvent limit = new DeviceEvent(DeviceEvent.Kind.SRQ_LIMIT, "IBV_EVENT_SRQ_LIMIT_REACHED", "fake0", 0,
                    -1);
            c.fabric.injectDeviceEvent(limit);
            assertEquals(limit, heard.get(5, TimeUnit.SECONDS));
            assertWorks(c.client, c.serverSide);
        }
    }

    @Test
    void deviceRemovalFailsItsConnectionsReleasesTheDeviceAndTheListenerRecovers() throws Exception {
        try (Connection c = new Connection(config(), config())) {
            FabricDevice old = c.fabric.device();
            c.fabric.removeDevice();
            assertTrue(causeOf(c.clientSide).contains("RDMA device fake0 was removed (RDMA_CM_EVENT_DEVICE_REMOVAL)"));
            assertTrue(causeOf(c.serverSide).contains("RDMA_CM_EVENT_DEVICE_REMOVAL"));
            // both transports stop their loops and deregister their memory there; only then is the device freed
            Peers.await("the removed device released", 5000, () -> c.fabric.releasedDevices().contains(old));
            assertEquals(0, c.fabric.liveQueuePairs());
            assertEquals(0, c.fabric.liveCompletionQueues());
            assertEquals(0, c.fabric.liveMemoryRegions());
            Peers.await("listener lost", 5000, () -> !c.fabric.isListening(c.server.localAddress()));
            assertThrows(FabricException.class, () -> c.clientTransport.connect(c.server.localAddress(),
                    new Peers.Recorder()));

            c.fabric.restoreDevice();
            assertNotSame(old, c.fabric.device());
            // retried every second: back within two attempts, with no call from the transport or the broker
            Peers.await("listener back", 2 * ListenerRecovery.RETRY_MILLIS + 1000,
                    () -> c.fabric.isListening(c.server.localAddress()));
            Peers.Recorder again = new Peers.Recorder();
            RdmaChannel fresh = c.clientTransport.connect(c.server.localAddress(), again);
            fresh.write(ByteBuffer.wrap(new byte[] {1}), true);
            Peers.await("a frame over a connection after recovery", 5000, () -> c.serverSide.count() >= 1
                    || c.serverTransport.channelCount() >= 1);
            assertTrue(fresh.isOpen());
            fresh.close();
        }
    }

    @Test
    void anAddressChangeRebindsTheListener() throws Exception {
        try (Connection c = new Connection(config(), config())) {
            int bound = c.fabric.listensBound();
            c.fabric.changeListenerAddress(c.server.localAddress());
            // the old listener answers isListening until the event reaches it: wait for the new bind
            Peers.await("listener rebound", 2 * ListenerRecovery.RETRY_MILLIS + 2000,
                    () -> c.fabric.listensBound() > bound && c.fabric.isListening(c.server.localAddress())
                            && c.fabric.releasedDevices().isEmpty());
            Peers.Recorder again = new Peers.Recorder();
            RdmaChannel fresh = c.clientTransport.connect(c.server.localAddress(), again);
            assertTrue(fresh.isOpen());
            fresh.close();
        }
    }
}
