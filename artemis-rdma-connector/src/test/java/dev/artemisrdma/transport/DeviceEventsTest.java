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
import dev.artemisrdma.transport.fabric.LogCapture;
import dev.artemisrdma.transport.fabric.WcStatus;

/**
 * Device events (verbs async events, device removal, address change) fail exactly the connections they hit, with a
 * reason naming the device, port or queue pair and the event; a port that goes down fails its connections only if it
 * stays down longer than their retry budget; a lost device is released; a listener recovers.
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

    /** The configuration with {@code ackTimeout}: its retry budget (retry count 7, both sides) is 8 x 4.096 us x 2^it. */
    /** Retry count 7 on both sides, so that both ends of a connection have the same budget (an accepted one's). */
    private static TransportConfig withAckTimeout(int ackTimeout) {
        return config().toBuilder().ackTimeout(ackTimeout).retryCount(7).build();
    }

    private static DeviceEvent portDown() {
        return DeviceEvent.port(DeviceEvent.Kind.PORT_DOWN, "IBV_EVENT_PORT_ERR", "fake0", 1);
    }

    private static DeviceEvent portUp() {
        return DeviceEvent.port(DeviceEvent.Kind.PORT_UP, "IBV_EVENT_PORT_ACTIVE", "fake0", 1);
    }

    /** How late a check may come on a loaded machine before a test calls it a failure. */
    private static final long SLACK_MILLIS = 5_000;

    @Test
    void aPortThatStaysDownFailsEveryConnectionOnItOnceTheRetryBudgetIsOverNamingPortDeviceEventAndBudget()
            throws Exception {
        TransportConfig small = withAckTimeout(12); // 8 x 16.8 ms
        long budget = small.retryBudget().toMillis();
        assertEquals(134, budget);
        try (Connection c = new Connection(small, small)) {
            long start = System.nanoTime();
            c.fabric.injectDeviceEvent(portDown());
            for (Peers.Recorder side : new Peers.Recorder[] {c.clientSide, c.serverSide}) {
                FabricException cause = side.closed.get(budget + SLACK_MILLIS, TimeUnit.MILLISECONDS);
                long after = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                assertTrue(after >= budget, "failed " + after + " ms after the port went down, within its budget of "
                        + budget + " ms");
                assertNotNull(cause, "a device event is a failure, not a local close");
                assertTrue(cause.getMessage().contains("port 1 of RDMA device fake0 went down (IBV_EVENT_PORT_ERR) "
                        + "and stayed down for longer than the retry budget of 134 ms"), cause.getMessage());
            }
        }
    }

    @Test
    void aPortBackWithinTheRetryBudgetCostsNoConnectionAndItStillCarriesFramesBothWays() throws Exception {
        TransportConfig config = withAckTimeout(14); // 8 x 67 ms
        long budget = config.retryBudget().toMillis();
        try (Connection c = new Connection(config, config); LogCapture log = new LogCapture()) {
            c.fabric.injectDeviceEvent(portDown());
            c.fabric.injectDeviceEvent(portUp());
            Peers.await("the port back", SLACK_MILLIS, () -> log.count("is active again after") == 1);
            assertEquals(1, log.count("IBV_EVENT_PORT_ERR on RDMA device fake0 port 1: 2 connection(s) on it wait "
                    + "up to " + budget + " ms (the retry budget) for the port to come back"));
            assertEquals(1, log.count("port 1 of RDMA device fake0 is active again after"));
            assertEquals(1, log.count("; 2 connection(s) rode it out"));
            Thread.sleep(budget + 300); // past the budget: a check the port-up did not stop would have failed them
            assertFalse(c.clientSide.closed.isDone(), "the client's end failed: " + c.clientSide.closed.getNow(null));
            assertFalse(c.serverSide.closed.isDone(), "the server's end failed: " + c.serverSide.closed.getNow(null));
            assertWorks(c.client, c.serverSide);
            assertWorks(c.serverChannel, c.clientSide);
        }
    }

    @Test
    void aPortThatGoesDownUpAndDownAgainGivesItsConnectionsAFreshFullBudget() throws Exception {
        TransportConfig config = withAckTimeout(14); // 8 x 67 ms
        long budget = config.retryBudget().toMillis();
        try (Connection c = new Connection(config, config)) {
            c.fabric.injectDeviceEvent(portDown());
            Thread.sleep(budget * 2 / 3); // most of the first budget gone
            c.fabric.injectDeviceEvent(portUp());
            long secondDown = System.nanoTime();
            c.fabric.injectDeviceEvent(portDown());
            FabricException cause = c.clientSide.closed.get(budget + SLACK_MILLIS, TimeUnit.MILLISECONDS);
            long after = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - secondDown);
            // the first outage would have ended it about budget / 3 after the second port-down
            assertTrue(after >= budget, "failed " + after + " ms after the second port-down, before a full budget of "
                    + budget + " ms");
            assertNotNull(cause);
            assertTrue(cause.getMessage().contains("stayed down for longer than the retry budget of " + budget
                    + " ms"), cause.getMessage());
            assertNotNull(c.serverSide.closed.get(SLACK_MILLIS, TimeUnit.MILLISECONDS));
        }
    }

    @Test
    void eachSideWaitsItsOwnBudgetTheAcceptingOneWithRetryCountSeven() throws Exception {
        // the accepting side: the listener's ackTimeout with 7 retries, 8 x 4.2 ms; the client's budget is 2.1 s
        try (Connection c = new Connection(withAckTimeout(10), withAckTimeout(16))) {
            c.fabric.injectDeviceEvent(portDown());
            FabricException cause = c.serverSide.closed.get(SLACK_MILLIS, TimeUnit.MILLISECONDS);
            assertNotNull(cause);
            assertTrue(cause.getMessage().endsWith("stayed down for longer than the retry budget of 33 ms"),
                    cause.getMessage());
        }
        // the connecting side: its own ackTimeout and retryCount, 2 x 4.2 ms
        TransportConfig client = withAckTimeout(10).toBuilder().retryCount(1).build();
        try (Connection c = new Connection(withAckTimeout(16), client)) {
            c.fabric.injectDeviceEvent(portDown());
            FabricException cause = c.clientSide.closed.get(SLACK_MILLIS, TimeUnit.MILLISECONDS);
            assertNotNull(cause);
            assertTrue(cause.getMessage().endsWith("stayed down for longer than the retry budget of 8 ms"),
                    cause.getMessage());
        }
    }

    @Test
    void sendsThatExceedTheirRetriesWhileThePortIsDownFailTheConnectionNamingThePeer() throws Exception {
        TransportConfig config = withAckTimeout(20); // a budget of 34 s: the port-down check is not what fails it
        try (Connection c = new Connection(config, config)) {
            c.fabric.injectDeviceEvent(portDown());
            c.fabric.injectSendErrors(WcStatus.RETRY_EXC_ERR, 1); // what the queue pair reports once its budget is out
            try {
                c.client.write(ByteBuffer.wrap(new byte[] {1, 2, 3}), true);
            } catch (FabricException failedAlready) {
                // the completion may have failed the channel before the flush returned
            }
            FabricException cause = c.clientSide.closed.get(SLACK_MILLIS, TimeUnit.MILLISECONDS);
            assertNotNull(cause);
            String why = cause.getMessage();
            assertTrue(why.contains("IBV_WC_RETRY_EXC_ERR") && why.contains("transport retries exceeded")
                    && why.contains(RdmaTransport.describe(c.server.localAddress())), why);
            assertNotNull(c.serverSide.closed.get(SLACK_MILLIS, TimeUnit.MILLISECONDS), "the peer hears of it");
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
