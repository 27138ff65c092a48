package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.api.SendBuffer;
import dev.artemisrdma.transport.channel.RdmaChannelImpl;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.LogCapture;
import dev.artemisrdma.transport.flow.BufferPool;

/** Dying completion loops, and the bounds on loops, registered memory, handshakes and idle send slabs. */
class TransportLimitsTest {

    private static TransportConfig.Builder small() {
        return TransportConfig.builder().sharedReceiveQueue(false).rnrRetryCount(0).busyPollMicros(0).receiveSlots(8).slotSize(1024)
                .connectTimeout(Duration.ofSeconds(5));
    }

    static Stream<Throwable> loopDeaths() {
        return Stream.of(new FabricException("ibv_poll_cq failed (EIO)"), new IllegalStateException("a bug"),
                new OutOfMemoryError("injected"));
    }

    @ParameterizedTest
    @MethodSource("loopDeaths")
    void aDeadCompletionLoopLeavesServiceItsChannelsFailWithTheCauseAndNewConnectionsGetAFreshLoop(Throwable death)
            throws Exception {
        try (Connection c = new Connection(small().build(), small().build())) {
            FabricDevice device = c.fabric.device();
            c.fabric.failNextPoll(((RdmaChannelImpl) c.serverChannel).qpNumber(), death);

            FabricException cause = c.serverSide.closed.get(5, TimeUnit.SECONDS);
            assertNotNull(cause, "the server's channel failed without a cause");
            assertTrue(cause.getMessage().contains("completion loop") && cause.getMessage().contains(
                    death.getMessage()), cause.getMessage());
            assertNotNull(c.clientSide.closed.get(5, TimeUnit.SECONDS), "the peer was not told");
            Peers.await("the dead loop's queue destroyed", 5000, () -> c.fabric.liveCompletionQueues() == 1);
            assertEquals(0, c.serverTransport.completionLoops(device), "the dead loop is still in service");

            // the server goes on serving, on a fresh loop
            Peers.Recorder second = new Peers.Recorder();
            RdmaChannel again = c.clientTransport.connect(c.server.localAddress(), second);
            again.write(ByteBuffer.wrap(new byte[] {7, 8, 9}), true);
            Peers.await("a frame on the fresh loop", 5000, () -> c.serverSide.count() == 1);
            assertEquals(1, c.serverTransport.completionLoops(device));
            again.close();
        }
    }

    @Test
    void aConnectionHalfSetUpWhenItsLoopDiesIsRefusedAndTheQueueOutlivesItsQueuePair() throws Exception {
        try (Connection c = new Connection(small().build(), small().build())) {
            FabricDevice device = c.fabric.device();
            c.fabric.beforeAcceptPrepare(qpn -> {
                c.fabric.failNextPoll(qpn, new FabricException("ibv_poll_cq failed (EIO)"));
                try {
                    Peers.await("the loop out of service", 5000, () -> c.serverTransport.completionLoops(device) == 0);
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            FabricException refused = assertThrows(FabricException.class,
                    () -> c.clientTransport.connect(c.server.localAddress(), new Peers.Recorder()));
            assertTrue(refused.getMessage().contains("completion loop"), refused.getMessage());
            c.fabric.beforeAcceptPrepare(qpn -> { });
            Peers.await("the dead loop's queue destroyed", 5000, () -> c.fabric.liveCompletionQueues() == 1);
            c.fabric.assertNoViolations(); // no queue pair was ever created on, or left on, a destroyed queue
            c.clientTransport.connect(c.server.localAddress(), new Peers.Recorder()).close();
        }
    }

    @Test
    void completionLoopsStopAtTheirCapAndTheRefusalNamesTheKey() throws Exception {
        // each loop's queue holds one connection: 9 receives + 40 sends of 64 entries
        TransportConfig server = small().sendQueueDepth(40).completionQueueEntries(64).maxCompletionLoops(2).build();
        try (Connection c = new Connection(server, small().build())) {
            RdmaChannel second = c.clientTransport.connect(c.server.localAddress(), new Peers.Recorder());
            FabricException refused = assertThrows(FabricException.class,
                    () -> c.clientTransport.connect(c.server.localAddress(), new Peers.Recorder()));
            assertTrue(refused.getMessage().contains("raise maxCompletionLoops"), refused.getMessage());
            assertEquals(2, c.serverTransport.completionLoops(c.fabric.device()));
            second.close();
            Peers.await("a place freed", 5000, () -> c.serverTransport.channelCount() == 1);
            c.clientTransport.connect(c.server.localAddress(), new Peers.Recorder()).close();
        }
    }

    @Test
    void registeredMemoryIsCappedPerTransportAndGivenBack() throws Exception {
        // one connection registers 9 slots of 64 KiB and its send headers: about 600 KiB of the 1 MiB allowed
        TransportConfig server = small().slotSize(64 << 10).maxRegisteredMemory(1 << 20).build();
        try (Connection c = new Connection(server, small().slotSize(64 << 10).build())) {
            FabricDevice device = c.fabric.device();
            long one = c.serverTransport.registeredBytes(device);
            assertTrue(one > 9 * (64 << 10) && one <= 1 << 20, "registered " + one);
            FabricException refused = assertThrows(FabricException.class,
                    () -> c.clientTransport.connect(c.server.localAddress(), new Peers.Recorder()));
            assertTrue(refused.getMessage().contains("raise maxRegisteredMemory"), refused.getMessage());
            assertEquals(one, c.serverTransport.registeredBytes(device), "a refused connection kept memory");
            c.client.close();
            Peers.await("memory given back", 5000, () -> c.serverTransport.registeredBytes(device) == 0);
            RdmaChannel next = c.clientTransport.connect(c.server.localAddress(), new Peers.Recorder());
            assertEquals(one, c.serverTransport.registeredBytes(device));
            next.close();
        }
    }

    @Test
    void aPeerThatNeverCompletesTheHandshakeLosesItsQueuePairAndMemoryAtTheDeadline() throws Exception {
        FakeFabric fabric = new FakeFabric();
        TransportConfig server = small().handshakeTimeout(Duration.ofMillis(300)).build();
        try (RdmaTransport serverTransport = RdmaTransport.create(fabric, server);
             RdmaTransport clientTransport = RdmaTransport.create(fabric,
                     small().connectTimeout(Duration.ofSeconds(3)).build())) {
            List<RdmaChannel> accepted = new java.util.concurrent.CopyOnWriteArrayList<>();
            Peers.Recorder serverSide = new Peers.Recorder();
            RdmaServer listening = serverTransport.listen(Peers.serverAddress(), ch -> {
                accepted.add(ch);
                return serverSide;
            });
            fabric.stallHandshakes(true);
            Thread stalled = new Thread(() -> assertThrows(FabricException.class,
                    () -> clientTransport.connect(listening.localAddress(), new Peers.Recorder())));
            LogCapture log = new LogCapture();
            try (log) {
                stalled.start();
                Peers.await("the request accepted", 5000, () -> serverTransport.channelCount() == 1);
                Peers.await("the channel released at the deadline", 3000, () -> serverTransport.channelCount() == 0);
                // logged on the timer thread after the channel is released, outside the channel's lock
                Peers.await("the deadline logged with its advice", 3000,
                        () -> log.count("raise handshakeTimeout") > 0);
            }
            assertTrue(accepted.isEmpty(), "the application made nothing for a peer that never connected");
            assertFalse(serverSide.closed.isDone(), "and so hears nothing of it");
            assertEquals(0, serverTransport.channelCount());
            assertEquals(0, serverTransport.registeredBytes(fabric.device()), "memory still pinned");
            stalled.join(5000);
            Peers.await("queue pairs destroyed", 5000, () -> fabric.liveQueuePairs() == 0);

            fabric.stallHandshakes(false);
            clientTransport.connect(listening.localAddress(), new Peers.Recorder()).close();
        } finally {
            fabric.close();
        }
        fabric.assertNoViolations();
    }

    @Test
    void unfinishedHandshakesAreCappedPerSourceAndInTotalAndOtherSourcesStillGetIn() throws Exception {
        // issue 23 item 4: before the caps, one host opening connections it never finished held a queue pair, its
        // memory and a loop slot for each, as many as it liked, for handshakeTimeout each
        FakeFabric fabric = new FakeFabric();
        TransportConfig server = small().handshakeTimeout(Duration.ofSeconds(2)).maxPendingConnections(3)
                .maxPendingConnectionsPerSource(2).build();
        List<Thread> stalled = new ArrayList<>();
        try (RdmaTransport serverTransport = RdmaTransport.create(fabric, server);
             RdmaTransport clientTransport = RdmaTransport.create(fabric,
                     small().connectTimeout(Duration.ofSeconds(5)).build())) {
            RdmaServer listening = serverTransport.listen(Peers.serverAddress(), ch -> new Peers.Recorder());
            fabric.stallHandshakes(true);
            for (int i = 1; i <= 2; i++) { // the flooding host's two places
                stalled.add(Peers.stalledAndAccepted(clientTransport, listening, serverTransport, i));
            }
            FabricException perSource = assertThrows(FabricException.class,
                    () -> clientTransport.connect(listening.localAddress(), new Peers.Recorder()));
            assertTrue(perSource.getMessage().contains("maxPendingConnectionsPerSource"), perSource.getMessage());
            assertEquals(2, serverTransport.channelCount(), "the refused request cost nothing");

            fabric.connectFrom(InetAddress.getByAddress(new byte[] {10, 77, 0, 3})); // another host still gets in
            stalled.add(Peers.stalledAndAccepted(clientTransport, listening, serverTransport, 3));
            // the total is reached: a source that holds a place already gets no second one (a source holding none
            // still gets one, SourceLimitsTest.aFullBacklogStillAdmitsASourceThatHoldsNone)
            FabricException total = assertThrows(FabricException.class,
                    () -> clientTransport.connect(listening.localAddress(), new Peers.Recorder()));
            assertTrue(total.getMessage().contains("(3, maxPendingConnections) and 1 from 10.77.0.3"),
                    total.getMessage());
            assertEquals(3, serverTransport.channelCount(), "the refused request cost nothing");

            // the unfinished ones end at their deadline and give their places back
            for (Thread t : stalled) {
                t.join(10_000);
            }
            Peers.await("the stalled channels released", 5000, () -> serverTransport.channelCount() == 0);
            fabric.stallHandshakes(false);
            clientTransport.connect(listening.localAddress(), new Peers.Recorder()).close();
        } finally {
            fabric.close();
        }
        fabric.assertNoViolations();
    }

    @Test
    void idleSendSlabsGoBackToTheDevice() throws Exception {
        FakeFabric fabric = new FakeFabric();
        try (BufferPool pool = new BufferPool(fabric.device())) {
            List<SendBuffer> burst = new ArrayList<>();
            for (int i = 0; i < 5000; i++) { // more than one 1 MiB slab of 256-byte buffers
                burst.add(pool.allocate(200));
            }
            SendBuffer kept = pool.allocate(4000);
            assertEquals(3, pool.slabCount());
            burst.forEach(SendBuffer::release);
            assertEquals(0, pool.trim(System.nanoTime(), TimeUnit.HOURS.toNanos(1)), "released before idle");
            assertEquals(2, pool.trim(System.nanoTime() + 1, 0), "the two idle 256-byte slabs");
            assertEquals(1, pool.slabCount(), "the slab with a buffer out stays");
            assertEquals(1, fabric.liveMemoryRegions());
            pool.allocate(200).release(); // the class grows again
            kept.release();
        } finally {
            fabric.close();
        }
        assertEquals(0, fabric.liveMemoryRegions());
        fabric.assertNoViolations();
    }

    @Test
    void aSlabWithABufferOutOutlivesThePoolUntilTheBufferComesBack() throws Exception {
        FakeFabric fabric = new FakeFabric();
        try {
            BufferPool pool = new BufferPool(fabric.device());
            SendBuffer writing = pool.allocate(200); // a writer still encoding when the transport closes
            pool.allocate(5000).release();           // another class, nothing out
            assertEquals(2, fabric.liveMemoryRegions());
            pool.close();
            assertEquals(1, fabric.liveMemoryRegions(), "the idle slab goes at close, the one in use stays mapped");
            writing.buffer().putInt(42); // on real verbs this wrote into unmapped memory: a JVM crash
            assertThrows(FabricException.class, () -> pool.allocate(200), "a closed pool hands nothing out");
            writing.release();
            assertEquals(0, fabric.liveMemoryRegions(), "deregistered when its last buffer came back");
        } finally {
            fabric.close();
        }
        fabric.assertNoViolations();
    }
}
