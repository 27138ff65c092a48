package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;

/**
 * A server transport on a fake fabric that hostile {@link RawPeer}s attack, plus a well-behaved client transport to
 * prove after each attack that the server still serves. Every accepted channel's handler is recorded.
 */
public final class HostileServerFixture implements AutoCloseable {

    public final FakeFabric fabric = new FakeFabric();
    public final RdmaTransport server;
    final RdmaServer listener;
    public final List<Peers.Recorder> accepted = new CopyOnWriteArrayList<>();
    public final List<RdmaChannel> channels = new CopyOnWriteArrayList<>();
    private final RdmaTransport client;

    public HostileServerFixture(TransportConfig serverConfig) throws FabricException {
        server = RdmaTransport.create(fabric, serverConfig);
        client = RdmaTransport.create(fabric, TransportConfig.builder().busyPollMicros(0).build());
        listener = server.listen(Peers.serverAddress(), ch -> {
            Peers.Recorder r = new Peers.Recorder();
            accepted.add(r);
            channels.add(ch);
            return r;
        });
    }

    public RawPeer attacker(byte[] handshake) throws Exception {
        return RawPeer.connect(fabric, listener.localAddress(), handshake);
    }

    public RawPeer attacker() throws Exception {
        return attacker(RawPeer.honestHandshake());
    }

    /** The cause the server gave for closing the {@code n}th connection it accepted. */
    public FabricException closeCause(int n) throws Exception {
        return accepted.get(n).closed.get(5, TimeUnit.SECONDS);
    }

    /** A well-behaved client connects, sends a frame of {@code size} bytes, and the server gets it whole. */
    public void assertStillServes(int size) throws Exception {
        Peers.Recorder mine = new Peers.Recorder();
        int before = accepted.size();
        try (RdmaChannel ch = client.connect(listener.localAddress(), mine)) {
            byte[] frame = Peers.payload(7, 0, size);
            ch.write(ByteBuffer.wrap(frame), true);
            Peers.await("the well-behaved client's frame", 5000,
                    () -> accepted.size() > before && accepted.get(before).count() == 1);
            assertEquals(Peers.crc(frame), accepted.get(before).crcs.get(0));
        }
    }

    @Override
    public void close() throws Exception {
        client.close();
        server.close();
        try {
            Peers.await("queue pairs released", 5000, () -> fabric.liveQueuePairs() == 0);
            assertEquals(0, fabric.liveMemoryRegions(), "live memory regions");
            assertEquals(0, server.reassemblyBudget().used(), "reassembly bytes still reserved");
            fabric.assertNoViolations();
        } finally {
            fabric.close();
        }
    }
}
