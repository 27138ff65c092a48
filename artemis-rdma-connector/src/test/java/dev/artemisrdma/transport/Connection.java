package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.channel.ChannelHooks;
import dev.artemisrdma.transport.config.TransportConfig;

/** A fake fabric, a server transport and a client transport, one channel between them. */
public final class Connection implements AutoCloseable {

    public final FakeFabric fabric;
    public final RdmaTransport serverTransport;
    public final RdmaTransport clientTransport;
    final RdmaServer server;
    public final Peers.Recorder serverSide;
    public final Peers.Recorder clientSide;
    public final RdmaChannel client;
    public final RdmaChannel serverChannel;

    public Connection(TransportConfig serverConfig, TransportConfig clientConfig) throws Exception {
        this(new FakeFabric(), serverConfig, clientConfig);
    }

    public Connection(FakeFabric fabric, TransportConfig serverConfig, TransportConfig clientConfig) throws Exception {
        this(fabric, serverConfig, clientConfig, new Peers.Recorder(), new Peers.Recorder());
    }

    /** With handlers of the test's own (e.g. {@link Peers.HoldingRecorder}). */
    public Connection(FakeFabric fabric, TransportConfig serverConfig, TransportConfig clientConfig,
                      Peers.Recorder serverSide, Peers.Recorder clientSide) throws Exception {
        this.fabric = fabric;
        this.serverSide = serverSide;
        this.clientSide = clientSide;
        serverTransport = RdmaTransport.create(fabric, serverConfig);
        clientTransport = RdmaTransport.create(fabric, clientConfig);
        CompletableFuture<RdmaChannel> admitted = new CompletableFuture<>();
        CompletableFuture<RdmaChannel> established = new CompletableFuture<>();
        // the server's channel as its request arrives: a test may hold rdma_cm's ESTABLISHED back
        server = serverTransport.listen(Peers.serverAddress(),
                Peers.admitting(admitted::complete, established::complete, serverSide));
        client = clientTransport.connect(server.localAddress(), clientSide);
        serverChannel = admitted.get(5, TimeUnit.SECONDS);
        if (!fabric.holdPassiveEstablished) {
            established.get(5, TimeUnit.SECONDS);
            // both ends open, as a test expects of a connection: the acceptor is told (and makes its handler) just
            // before the channel opens, so a write in between would be queued until the open posts it
            Peers.await("the server's channel open", 5000, () -> ChannelHooks.established(serverChannel));
        }
    }

    /** Closes both transports and checks that every resource went back and no rule was broken. */
    @Override
    public void close() throws Exception {
        clientTransport.close();
        serverTransport.close();
        try {
            assertReleased();
        } finally {
            fabric.close();
        }
    }

    void assertReleased() throws InterruptedException {
        Peers.await("queue pairs released", 5000, () -> fabric.liveQueuePairs() == 0);
        assertEquals(0, fabric.liveQueuePairs(), "live queue pairs");
        assertEquals(0, fabric.liveCompletionQueues(), "live completion queues");
        assertEquals(0, fabric.liveMemoryRegions(), "live memory regions");
        fabric.assertNoViolations();
    }
}
