package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;

/** Many channels over shared completion queues and loops; greetings written before the channel is established. */
class ManyChannelsTest {

    @Test
    void channelsShareLoopsAndKeepTheirOwnOrder() throws Exception {
        TransportConfig config = TransportConfig.builder().completionThreads(2).receiveSlots(4).slotSize(512)
                .sendQueueDepth(8).rnrRetryCount(0).busyPollMicros(10).build();
        FakeFabric fabric = new FakeFabric();
        Map<String, Peers.Recorder> serverSides = new ConcurrentHashMap<>();
        Set<String> loopThreads = ConcurrentHashMap.newKeySet();
        try (RdmaTransport server = RdmaTransport.create(fabric, config);
             RdmaTransport client = RdmaTransport.create(fabric, config)) {
            RdmaServer s = listenRecordingLoops(server, serverSides, loopThreads, ch -> {
                try {
                    // written before the connection is established: queued, then sent in order
                    ch.write(ByteBuffer.wrap("hello".getBytes()), true);
                } catch (FabricException e) {
                    throw new IllegalStateException(e);
                }
            });
            List<RdmaChannel> channels = new ArrayList<>();
            List<Peers.Recorder> clientSides = new ArrayList<>();
            for (int i = 0; i < 6; i++) {
                Peers.Recorder r = new Peers.Recorder();
                r.keepFrames = true;
                clientSides.add(r);
                channels.add(client.connect(s.localAddress(), r));
            }
            for (int round = 0; round < 100; round++) {
                for (int i = 0; i < channels.size(); i++) {
                    channels.get(i).write(ByteBuffer.wrap(Peers.payload(i, round, 1 + (round * 131) % 2000)), true);
                }
            }
            for (int i = 0; i < channels.size(); i++) {
                RdmaChannel ch = channels.get(i);
                String key = ch.localAddress().toString();
                Peers.await("the server's side of channel " + i, 10_000, () -> serverSides.containsKey(key));
                Peers.Recorder r = serverSides.get(key);
                Peers.await("frames of channel " + i, 10_000, () -> r.count() == 100);
                for (int round = 0; round < 100; round++) {
                    assertEquals(Peers.crc(Peers.payload(i, round, 1 + (round * 131) % 2000)), r.crcs.get(round));
                }
                assertEquals("hello", new String(clientSides.get(i).frames.take()));
            }
            assertEquals(2, loopThreads.size(), "channels spread over both loops: " + loopThreads);
            Set<String> ids = new HashSet<>();
            channels.forEach(c -> ids.add(c.id()));
            assertEquals(6, ids.size());
            assertTrue(server.channelCount() == 6 && client.channelCount() == 6);
        }
        assertEquals(0, fabric.liveQueuePairs());
        assertEquals(0, fabric.liveCompletionQueues());
        assertEquals(0, fabric.liveMemoryRegions());
        fabric.assertNoViolations();
        fabric.close();
    }

    @Test
    void fullCompletionQueuesAddLoopsInsteadOfRefusingConnections() throws Exception {
        // about 33 entries per channel and 64 per queue: one channel per completion queue
        TransportConfig config = TransportConfig.builder().completionThreads(1).completionQueueEntries(64)
                .receiveSlots(8).slotSize(512).sendQueueDepth(24).rnrRetryCount(0).busyPollMicros(0).build();
        FakeFabric fabric = new FakeFabric();
        Set<String> serverLoops = ConcurrentHashMap.newKeySet();
        Map<String, Peers.Recorder> serverSides = new ConcurrentHashMap<>();
        try (RdmaTransport server = RdmaTransport.create(fabric, config);
             RdmaTransport client = RdmaTransport.create(fabric, config)) {
            RdmaServer s = listenRecordingLoops(server, serverSides, serverLoops, ch -> { });
            List<RdmaChannel> channels = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                channels.add(client.connect(s.localAddress(), new Peers.Recorder()));
            }
            for (int i = 0; i < channels.size(); i++) {
                channels.get(i).write(ByteBuffer.wrap(Peers.payload(i, 0, 300)), true);
            }
            for (int i = 0; i < channels.size(); i++) {
                String key = channels.get(i).localAddress().toString();
                // connect returns once the client's side is open; the server's handler is made on its own loop
                Peers.await("the server's side of channel " + i, 10_000, () -> serverSides.containsKey(key));
                Peers.Recorder r = serverSides.get(key);
                Peers.await("frame of channel " + i, 10_000, () -> r.count() == 1);
                assertEquals(Peers.crc(Peers.payload(i, 0, 300)), r.crcs.get(0));
            }
            assertEquals(4, serverLoops.size(), "each channel on a loop of its own: " + serverLoops);
            assertEquals(4, server.channelCount());
            assertEquals(4, client.channelCount());
        }
        assertEquals(0, fabric.liveQueuePairs());
        assertEquals(0, fabric.liveCompletionQueues());
        assertEquals(0, fabric.liveMemoryRegions());
        fabric.assertNoViolations();
        fabric.close();
    }

    /** A server whose channels record their frames and the loop threads that deliver them. */
    private static RdmaServer listenRecordingLoops(RdmaTransport server, Map<String, Peers.Recorder> sides,
            Set<String> loopThreads, java.util.function.Consumer<RdmaChannel> onAccept) throws FabricException {
        return server.listen(Peers.serverAddress(), ch -> {
            Peers.Recorder r = new Peers.Recorder() {
                @Override
                public void onFrame(RdmaChannel channel, ByteBuffer frame) {
                    loopThreads.add(Thread.currentThread().getName());
                    super.onFrame(channel, frame);
                }
            };
            sides.put(ch.remoteAddress().toString(), r);
            onAccept.accept(ch);
            return r;
        });
    }
}
