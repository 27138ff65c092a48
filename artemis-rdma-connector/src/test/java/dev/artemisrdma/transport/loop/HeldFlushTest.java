package dev.artemisrdma.transport.loop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.List;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.Connection;
import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.TransportHooks;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.stats.TransportStats;

/**
 * A writer's flush of several frames waits behind a signaled SEND in flight and leaves, packed, when it completes
 * (no timer); a lone frame never waits. Frozen peer: the SEND in flight is neither acknowledged nor completed.
 */
class HeldFlushTest {

    private static TransportConfig strict() {
        return TransportConfig.builder().rnrRetryCount(0).busyPollMicros(0).build();
    }

    private static void writeBurst(RdmaChannel ch, int stream, int from, int count) throws FabricException {
        for (int i = from; i < from + count; i++) {
            ch.write(ByteBuffer.wrap(Peers.payload(stream, i, 300)), i == from + count - 1);
        }
    }

    private static long dataSends(RdmaChannel ch) {
        TransportStats s = ch.stats();
        return s.sendsPosted() - s.creditFramesSent();
    }

    /**
     * Waits until the client's completion loop blocks in its long idle wait: a tick of the loop (the one the
     * connect's move to OPEN asked for, or a short wait's timeout) flushes the channel, held frames included, and
     * would post them early.
     */
    private static void settle(Connection c) throws InterruptedException {
        List<CompletionLoop> loops = TransportHooks.loops(c.clientTransport, c.fabric.device());
        Peers.await("the client's loop idle", 10_000, () -> loops.stream().allMatch(CompletionLoop::isBlockedIdle));
    }

    @Test
    void severalFramesFlushedBehindASendInFlightLeaveWhenItCompletes() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            settle(c);
            c.fabric.freeze(c.serverChannel.localAddress());
            writeBurst(c.client, 1, 0, 3); // posted at once, as one pack whose SEND asks a completion
            assertEquals(1, dataSends(c.client), c.client.stats().toString());
            writeBurst(c.client, 1, 3, 3); // held: the first pack is in flight
            writeBurst(c.client, 1, 6, 3);
            Thread.sleep(50);
            // data SENDs only: a credit return for what the server sent while connecting may still leave meanwhile
            assertEquals(1, dataSends(c.client), "held behind the SEND in flight: " + c.client.stats());
            c.fabric.thaw(c.serverChannel.localAddress());
            Peers.await("every frame", 5000, () -> c.serverSide.count() == 9);
            for (int i = 0; i < 9; i++) {
                assertEquals(Peers.crc(Peers.payload(1, i, 300)), c.serverSide.crcs.get(i), "frame " + i);
            }
            TransportStats s = c.client.stats();
            // the six held frames went together once the first SEND completed
            assertEquals(2, dataSends(c.client), s.toString());
            assertEquals(9, s.framesPacked(), s.toString());
        }
    }

    @Test
    void aLoneFrameLeavesAtOnceEvenBehindASendInFlight() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            settle(c);
            c.fabric.freeze(c.serverChannel.localAddress());
            writeBurst(c.client, 2, 0, 2);
            assertEquals(1, dataSends(c.client), c.client.stats().toString());
            c.client.write(ByteBuffer.wrap(Peers.payload(2, 2, 300)), true);
            assertEquals(2, dataSends(c.client), "the lone frame was posted at once: " + c.client.stats());
            c.fabric.thaw(c.serverChannel.localAddress());
            Peers.await("every frame", 5000, () -> c.serverSide.count() == 3);
            for (int i = 0; i < 3; i++) {
                assertEquals(Peers.crc(Peers.payload(2, i, 300)), c.serverSide.crcs.get(i), "frame " + i);
            }
        }
    }

    @Test
    void aStreamFlushedEveryFewFramesArrivesWholeAndInOrder() throws Exception {
        try (Connection c = new Connection(strict(), strict())) {
            int total = 5000;
            for (int i = 0; i < total; i += 4) {
                writeBurst(c.client, 3, i, 4);
            }
            Peers.await("every frame", 20_000, () -> c.serverSide.count() == total);
            for (int i = 0; i < total; i++) {
                assertEquals(Peers.crc(Peers.payload(3, i, 300)), c.serverSide.crcs.get(i), "frame " + i);
            }
            TransportStats s = c.client.stats();
            assertTrue(s.framesPerDataSend() >= 4, s.toString());
        }
    }
}
