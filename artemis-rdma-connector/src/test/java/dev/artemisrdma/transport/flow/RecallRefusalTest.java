package dev.artemisrdma.transport.flow;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.FakeFabric;
import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.RawPeer;
import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;

/** Nothing sleeps on the connection-manager thread: a listener whose loops are full never waits there for a recall. */
class RecallRefusalTest {

    @Test
    void aFullPoolWhoseRecallGoesUnansweredNeverHoldsTheConnectionManagerThread() throws Exception {
        // one loop with a pool of 24: a hog grows its window to receiveSlots + 1 = 17 and never answers a recall, B
        // takes the minimum (21 of 24 promised), so C (4 more) finds no room while a recall is under way. The
        // listener used to sleep on rdma_cm's thread for up to 200 ms each time, waiting for room. (The hog, above
        // its fair share, is failed half a second into the refusals now; C is refused until then.)
        TransportConfig serverConfig = onePoolOf24().build();
        onListener(serverConfig, (fabric, server, client, s) -> {
            byte[] grows = SharedPoolFairShareTest.grows(true);
            try (RawPeer hog = RawPeer.connect(fabric, s.localAddress(), grows)) {
                SharedReceivePool pool = SharedReceiveQueueTest.poolOf(server);
                SharedPoolFairShareTest.growTo(hog, pool, serverConfig.receiveSlots() + 1);
                assertTrue(pool.committed() == serverConfig.receiveSlots() + 1, "the hog's window grew: " + pool);
                RdmaChannel b = client.connect(s.localAddress(), new Peers.Recorder());
                connectC(client, s); // the first refusals load their code; the listener then waited, too
                Thread.sleep(1_000); // and after a wait in vain it waited again only a second later
                fabric.longestRequestNanos.set(0);
                long began = System.nanoTime();
                connectC(client, s);
                long longest = TimeUnit.NANOSECONDS.toMillis(fabric.longestRequestNanos.get());
                assertTrue(pool.admissionsRefused >= 1, "C found the pool full: " + pool);
                assertTrue(s.stats().refused() >= 1, "C was refused at least once");
                assertTrue(longest < 100, "a connection request held rdma_cm's thread for " + longest + " ms; C's "
                        + "connect took " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - began) + " ms");
                b.close();
            }
        });
    }

    @Test
    void recallsThatBringNothingBackEndInARefusalThatNamesTheLimit() throws Exception {
        // the question is what C hears once recalls bring nothing back: "retry soon" for ever would have every
        // newcomer retry in vain for a second; after two fruitless recalls the listener says that its loops are full
        // and what to raise. A window above its fair share is failed instead (SharedPoolFairShareTest), so here two
        // windows hold exactly their share of a pool that keeps no reserve (12 + 12 of 24): full, and fairly so
        onListener(onePoolOf24().sharedReceiveReserve(0).build(), (fabric, server, client, s) -> {
            byte[] grows = SharedPoolFairShareTest.grows(true);
            try (RawPeer first = RawPeer.connect(fabric, s.localAddress(), grows);
                 RawPeer second = RawPeer.connect(fabric, s.localAddress(), grows)) {
                SharedReceivePool pool = SharedReceiveQueueTest.poolOf(server);
                SharedPoolFairShareTest.growTo(first, pool, 12 + TransportConfig.SHARED_MIN_CREDITS);
                SharedPoolFairShareTest.growTo(second, pool, 24);
                assertTrue(pool.committed() == 24, "both windows grew to their share: " + pool);
                FabricException last = null;
                long began = System.nanoTime();
                for (int attempt = 0; attempt < 5 && (last == null || !last.getMessage().contains("maxCompletionLoops"));
                     attempt++) {
                    try {
                        client.connect(s.localAddress(), new Peers.Recorder()).close();
                        throw new AssertionError("C was admitted to a full pool: " + pool);
                    } catch (FabricException e) {
                        last = e;
                    }
                }
                long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - began);
                assertTrue(pool.recalls() >= 2, "the pool recalled: " + pool.recalls());
                assertTrue(last.getMessage().contains("maxCompletionLoops"), "after " + tookMillis + " ms: " + last);
                // the listener said so itself: C did not have to give up retrying to learn it
                assertFalse(last.getMessage().contains("still refused"), last.getMessage());
                assertTrue(tookMillis < 3_000, "the definitive refusal took " + tookMillis + " ms");
                assertFalse(first.isLost() || second.isLost(), "windows within their share are not failed");
            }
        });
    }

    /** What a test does with the listening server transport and a client transport on one fake fabric. */
    private interface Scene {
        void play(FakeFabric fabric, RdmaTransport server, RdmaTransport client, RdmaServer s) throws Exception;
    }

    /** Plays {@code scene} against a listener made with {@code serverConfig}; the fabric must see no violation. */
    private static void onListener(TransportConfig serverConfig, Scene scene) throws Exception {
        FakeFabric fabric = new FakeFabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, serverConfig);
             RdmaTransport client = RdmaTransport.create(fabric, TransportConfig.builder().busyPollMicros(0)
                     .build())) {
            scene.play(fabric, server, client, server.listen(Peers.serverAddress(), ch -> new Peers.Recorder()));
            fabric.assertNoViolations();
        } finally {
            fabric.close();
        }
    }

    /** C connects; while the hog holds its window, C is refused, with the reason an operator reads. */
    private static void connectC(RdmaTransport client, RdmaServer s) throws Exception {
        try {
            client.connect(s.localAddress(), new Peers.Recorder()).close();
        } catch (FabricException e) {
            assertTrue(e.getMessage().contains("loops are full"), e.getMessage());
        }
    }

    /** One completion loop whose shared pool holds 24 receives; windows grow up to receiveSlots + 1 = 17. */
    private static TransportConfig.Builder onePoolOf24() {
        return TransportConfig.builder().rnrRetryCount(0).busyPollMicros(0).receiveSlots(16).slotSize(512)
                .sendQueueDepth(32).sharedReceiveSlots(24).maxCompletionLoops(1);
    }
}
