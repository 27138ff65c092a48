package dev.artemisrdma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.verbs.VerbsFabric;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * 1,000 connect/write/close cycles on the real rxe devices deliver every frame written before each close and leave
 * nothing behind in the kernel.
 */
@Timeout(value = 900, unit = TimeUnit.SECONDS)
class ConnectionChurnLabTest {

    private static final int CYCLES = 1000;

    /** Counts frames; the server side of every cycle. */
    private static final class Counter implements ChannelHandler {
        final AtomicInteger frames = new AtomicInteger();

        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            frames.incrementAndGet();
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
        }
    }

    @Test
    void aThousandConnectCloseCyclesReturnEveryKernelObject() throws Exception {
        RdmaResources before = RdmaResources.afterWarmUp();
        TransportConfig config = TransportConfig.defaults().toBuilder().receiveSlots(8).slotSize(4096).build();
        Counter atServer = new Counter();
        long start = System.nanoTime();
        try (VerbsFabric fabric = new VerbsFabric();
             RdmaTransport serverTransport = RdmaTransport.create(fabric, config);
             RdmaTransport clientTransport = RdmaTransport.create(fabric, config)) {
            RdmaServer server = serverTransport.listen(Lab.address(Lab.addr1(), Lab.freshPort()), ch -> atServer);
            for (int i = 0; i < CYCLES; i++) {
                RdmaChannel client = clientTransport.connect(server.localAddress(), new Counter());
                client.write(ByteBuffer.wrap(new byte[] {(byte) i}), true);
                client.close();
            }
            // each close is a drain of at most 5 s on the server's loops; 60 s leaves room for a loaded lab
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (serverTransport.channelCount() > 0 && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            if (serverTransport.channelCount() > 0) {
                // a loop that stopped ticking keeps all its channels: its stack says where it is
                System.out.println("ConnectionChurnLabTest: " + serverTransport.channelCount() + " server channels "
                        + "left open after 60 s; loops: " + serverTransport.loopStats() + "\n" + Stacks.of("rdma-"));
            }
            assertEquals(0, serverTransport.channelCount(), "server channels left open");
            // every frame written before an orderly close arrives: a drain the peer began still delivers what it sent
            System.out.println(atServer.frames.get() + " of " + CYCLES + " frames written before a close arrived");
            assertEquals(CYCLES, atServer.frames.get(), "frames written before each close and delivered");
            server.close();
        }
        System.out.println(CYCLES + " connect/write/close cycles took "
                + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) + " ms");
        // the kernel may hold the last ids for as long as a DREQ goes unanswered (rdma_cm retries it for about a
        // minute); the fabric releases its devices once they are gone, so the counts come back then
        RdmaResources after = RdmaResources.awaitEqual(before, 90_000);
        assertEquals(before, after, "rdma resource show counts after " + CYCLES + " cycles");
    }
}
