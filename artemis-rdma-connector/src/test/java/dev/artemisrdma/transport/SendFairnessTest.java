package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;

/**
 * A peer that takes nothing costs only its own connection: a writer that ignores isWritable toward it meets
 * maxQueuedBytesPerConnection (the connection fails, never another one's allocation), and a writer that honours
 * isWritable waits at most unwritableTimeout before the connection fails. The server side writes here, as a broker
 * does; the clients are the peers, one of which stops returning credit (autoRead off).
 */
class SendFairnessTest {

    private static final int FRAME = 4096;

    private static TransportConfig.Builder small() {
        return TransportConfig.builder().sharedReceiveQueue(false).rnrRetryCount(0).busyPollMicros(0).receiveSlots(8)
                .slotSize(1024).connectTimeout(Duration.ofSeconds(5));
    }

    /** A server writing to {@code peers} clients; {@code server.get(i)} writes to {@code clients.get(i)}. */
    private static final class Pairs implements AutoCloseable {
        final FakeFabric fabric = new FakeFabric();
        final RdmaTransport serverTransport;
        final RdmaTransport clientTransport;
        final List<RdmaChannel> server = new ArrayList<>();
        final List<Peers.Recorder> serverSide = new ArrayList<>();
        final List<RdmaChannel> clients = new ArrayList<>();
        final List<Peers.Recorder> clientSide = new ArrayList<>();

        Pairs(TransportConfig serverConfig, int peers) throws Exception {
            serverTransport = RdmaTransport.create(fabric, serverConfig);
            clientTransport = RdmaTransport.create(fabric, small().build());
            BlockingQueue<RdmaChannel> accepted = new LinkedBlockingQueue<>();
            BlockingQueue<Peers.Recorder> handlers = new LinkedBlockingQueue<>();
            RdmaServer listening = serverTransport.listen(Peers.serverAddress(), ch -> {
                Peers.Recorder r = new Peers.Recorder();
                handlers.add(r);
                accepted.add(ch);
                return r;
            });
            for (int i = 0; i < peers; i++) {
                Peers.Recorder r = new Peers.Recorder();
                clients.add(clientTransport.connect(listening.localAddress(), r));
                clientSide.add(r);
                server.add(accepted.poll(5, TimeUnit.SECONDS));
                serverSide.add(handlers.poll(5, TimeUnit.SECONDS));
            }
        }

        @Override
        public void close() throws Exception {
            try {
                clientTransport.close();
                serverTransport.close();
                Peers.await("queue pairs released", 5000, () -> fabric.liveQueuePairs() == 0);
                assertEquals(0, fabric.liveMemoryRegions(), "live memory regions");
                fabric.assertNoViolations();
            } finally {
                fabric.close();
            }
        }
    }

    /** Writes {@code count} frames, waiting while the channel is not writable; what went wrong, or null. */
    private static Throwable writePolitely(RdmaChannel ch, int stream, int count) {
        try {
            for (int i = 0; i < count; i++) {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (!ch.isWritable()) {
                    if (System.nanoTime() > deadline) {
                        return new AssertionError(ch + " stayed unwritable");
                    }
                    Thread.sleep(1);
                }
                ch.write(ByteBuffer.wrap(Peers.payload(stream, i, FRAME)), true);
            }
            return null;
        } catch (Exception | AssertionError e) {
            return e;
        }
    }

    @Test
    void aGreedyWriterTowardAStalledPeerFailsItsOwnConnectionAndNoOtherMeetsSendMemoryException() throws Exception {
        // 8 MiB of registered memory; a connection may queue 1 MiB: a greedy writer ignoring isWritable would have
        // taken all 8 (and every other connection's next allocation would have failed) before it met any bound
        TransportConfig serverConfig = small().maxRegisteredMemory(8 << 20).writeHighWaterMark(64 << 10)
                .maxFrameSize(64 << 10).maxQueuedBytesPerConnection(1 << 20).build();
        int others = 5;
        int perOther = 400;
        try (Pairs p = new Pairs(serverConfig, others + 1)) {
            RdmaChannel greedy = p.server.get(0);
            p.clients.get(0).setAutoRead(false); // the peer returns no credit any more: it takes nothing

            List<Throwable> failures = Collections.synchronizedList(new ArrayList<>());
            List<Thread> writers = new ArrayList<>();
            for (int i = 1; i <= others; i++) {
                RdmaChannel ch = p.server.get(i);
                int stream = i;
                Thread t = new Thread(() -> {
                    Throwable t1 = writePolitely(ch, stream, perOther);
                    if (t1 != null) {
                        failures.add(t1);
                    }
                }, "polite-writer-" + i);
                t.start();
                writers.add(t);
            }

            FabricException refused = null;
            long written = 0;
            try {
                for (int i = 0; i < (16 << 20) / FRAME; i++) { // twice the whole registered memory, if it could
                    greedy.write(ByteBuffer.wrap(Peers.payload(0, i, FRAME)), true);
                    written += FRAME;
                }
            } catch (FabricException e) {
                refused = e; // before: "registered memory limit (raise maxRegisteredMemory)", all 8 MiB taken
            }
            assertNotNull(refused, "the greedy writer queued " + written + " bytes unrefused");
            assertTrue(refused.getMessage().contains("maxQueuedBytesPerConnection")
                    && refused.getMessage().contains(greedy.id())
                    && refused.getMessage().contains(RdmaTransport.describe(greedy.remoteAddress())),
                    refused.getMessage());
            // what the peer's posted receives took before it stopped returning credit left the queue: its 8 + 1
            // receives of 1 KiB, beyond the 1 MiB that may wait
            long peerTook = (8 + 1) * 1024L;
            assertTrue(written <= (1 << 20) + peerTook, "wrote " + written + " bytes: more than 1 MiB queued beyond the "
                    + peerTook + " bytes the peer's receives took");
            FabricException cause = p.serverSide.get(0).closed.get(5, TimeUnit.SECONDS);
            assertTrue(cause != null && cause.getMessage().contains("maxQueuedBytesPerConnection"), "closed with "
                    + cause);

            // the others write on, through and after the greedy one's failure, without an error
            for (Thread t : writers) {
                t.join(30_000);
            }
            assertEquals(List.of(), failures, "the well-behaved writers");
            for (int i = 1; i <= others; i++) {
                Peers.Recorder r = p.clientSide.get(i);
                Peers.await("client " + i + " received everything", 20_000, () -> r.count() == perOther);
                assertEquals(Peers.crc(Peers.payload(i, perOther - 1, FRAME)), r.crcs.get(perOther - 1));
                assertTrue(p.server.get(i).isOpen(), p.server.get(i) + " failed too");
            }
            FabricException closed = assertThrows(FabricException.class,
                    () -> greedy.write(ByteBuffer.allocate(1), true));
            assertTrue(closed.getMessage().contains("maxQueuedBytesPerConnection"), closed.getMessage());
        }
    }

    @Test
    void aConnectionWhosePeerStopsGrantingCreditFailsAfterUnwritableTimeoutAndOthersGoOn() throws Exception {
        TransportConfig serverConfig = small().writeHighWaterMark(16 << 10).unwritableTimeout(Duration.ofMillis(300))
                .build();
        try (Pairs p = new Pairs(serverConfig, 3)) {
            RdmaChannel stuck = p.server.get(0);
            p.clients.get(0).setAutoRead(false); // a backup that keeps its connection and withholds credit
            // a well-behaved writer: writes until the channel says it is not writable, then waits for it
            int frames = 0;
            while (stuck.isWritable()) {
                stuck.write(ByteBuffer.wrap(Peers.payload(0, frames++, FRAME)), true);
                assertTrue(frames < 1000, "never unwritable");
            }
            long unwritableAt = System.nanoTime();
            FabricException cause = p.serverSide.get(0).closed.get(5, TimeUnit.SECONDS);
            long after = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - unwritableAt);
            assertNotNull(cause, "closed without a cause");
            assertTrue(cause.getMessage().contains("unwritableTimeout") && cause.getMessage().contains(stuck.id())
                    && cause.getMessage().contains(RdmaTransport.describe(stuck.remoteAddress())),
                    cause.getMessage());
            assertTrue(after >= 250 && after < 2000, "failed " + after + " ms after turning unwritable");

            // the others, idle all along, were never unwritable: they are open and carry frames both ways
            for (int i = 1; i < 3; i++) {
                assertTrue(p.server.get(i).isOpen(), p.server.get(i) + " failed too");
                assertEquals(null, writePolitely(p.server.get(i), i, 200));
                Peers.Recorder r = p.clientSide.get(i);
                Peers.await("client " + i + " received everything", 10_000, () -> r.count() == 200);
                p.clients.get(i).write(ByteBuffer.wrap(new byte[] {1, 2, 3}), true);
                Peers.Recorder s = p.serverSide.get(i);
                Peers.await("server " + i + " received", 5000, () -> s.count() == 1);
            }
        }
    }
}
