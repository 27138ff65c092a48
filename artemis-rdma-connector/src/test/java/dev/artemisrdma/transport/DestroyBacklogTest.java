package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;

import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;

/**
 * Issue 37 hole 4: a peer that provokes a disconnect and then drops CM messages holds each rdma_destroy_id about a
 * minute; before, what waited for those destroys was unbounded, per source and in total, and the source kept
 * connecting. FakeFabric holds the closed queue pairs' ids as the kernel does ({@code holdIdDestroys}).
 */
class DestroyBacklogTest {

    private static TransportConfig.Builder small() {
        return TransportConfig.builder().receiveSlots(8).slotSize(4096).sendQueueDepth(16).maxFrameSize(64 << 10)
                .sharedReceiveQueue(false);
    }

    private static SourceKey key(String literal) throws Exception {
        return SourceKey.of(InetAddress.getByName(literal), 32, 64);
    }

    @Test
    void aSourceWhoseClosedConnectionsIdsWaitIsRefusedWhileOthersAreServed() throws Exception {
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport serverTransport = RdmaTransport.create(fabric, small().build());
             RdmaTransport clientTransport = RdmaTransport.create(fabric, small().build())) {
            RdmaServer listening = serverTransport.listen(Peers.serverAddress(), ch -> new Peers.Recorder());
            fabric.holdIdDestroys(true); // the peer answers no DREQ: every id it leaves behind waits in the kernel
            fabric.connectFrom(InetAddress.getByName("10.77.0.2"));
            for (int i = 0; i < DestroyBacklog.MAX_PER_SOURCE; i++) {
                clientTransport.connect(listening.localAddress(), new Peers.Recorder()).close();
            }
            Peers.await("the server's channels closed", 10_000, () -> serverTransport.channelCount() == 0);
            FabricException refused = assertThrows(FabricException.class,
                    () -> clientTransport.connect(listening.localAddress(), new Peers.Recorder()));
            assertTrue(refused.getMessage().contains("from 10.77.0.2 await destroy (64, "
                    + "DestroyBacklog.MAX_PER_SOURCE)"), refused.getMessage());
            assertEquals(0, serverTransport.channelCount(), "nothing was made for it");

            fabric.connectFrom(InetAddress.getByName("10.77.0.3")); // another host is served meanwhile
            RdmaChannel other = clientTransport.connect(listening.localAddress(), new Peers.Recorder());
            assertTrue(other.isOpen());
            other.close();

            fabric.releaseIdDestroys(); // the kernel let go of the ids: the source is served again
            fabric.holdIdDestroys(false);
            fabric.connectFrom(InetAddress.getByName("10.77.0.2"));
            clientTransport.connect(listening.localAddress(), new Peers.Recorder()).close();
        } finally {
            fabric.close();
        }
        fabric.assertNoViolations();
    }

    @Test
    void onceTheTotalIsReachedEachSourceIsHeldToItsFairShareAndANewSourceStillGetsIn() throws Exception {
        DestroyBacklog backlog = new DestroyBacklog(8, 6);
        SourceKey a = key("10.0.0.1");
        SourceKey b = key("10.0.0.2");
        Runnable first = null;
        for (int i = 0; i < 5; i++) {
            assertNull(backlog.refusal(a));
            Runnable w = backlog.waiting(a);
            first = first == null ? w : first;
        }
        assertNull(backlog.refusal(b));
        backlog.waiting(b); // 6 of 6 wait: a holds 5, above its share of 3 among 2 sources
        String why = backlog.refusal(a);
        assertNotNull(why);
        assertTrue(why.contains("DestroyBacklog.MAX_TOTAL") && why.contains("10.0.0.1"), why);
        assertNull(backlog.refusal(b), "b holds 1, below its share");
        assertNull(backlog.refusal(key("10.0.0.3")), "a source with none waiting is always admitted");
        first.run();
        first.run(); // reported gone twice, counted once
        assertEquals(4, backlog.held(a));
        assertEquals(5, backlog.total());
        assertNull(backlog.refusal(a), "below the total again");
    }
}
