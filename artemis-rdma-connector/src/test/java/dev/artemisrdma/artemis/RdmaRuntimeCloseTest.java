package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** A transport that takes long to close holds up nobody else in the JVM. */
class RdmaRuntimeCloseTest {

    private static final InetSocketAddress ADDRESS = new InetSocketAddress("127.0.0.1", 61761);

    @BeforeAll
    static void runtime() {
        TestRuntime.install();
    }

    private static final class Quiet implements ChannelHandler {
        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
        }
    }

    @Test
    void aSlowTransportCloseDoesNotBlockOtherAcquires() throws Exception {
        RdmaRuntime.Lease client = RdmaRuntime.acquire(TransportConfig.defaults());
        InetSocketAddress hung;
        CompletableFuture<Void> closed;
        try {
            // the server side's orderly close waits connectTimeout for a goodbye its hung peer never takes
            RdmaRuntime.Lease server = RdmaRuntime.acquire(TransportConfig.fromMap(Map.of("connectTimeout", "3s")));
            server.transport().listen(ADDRESS, ch -> new Quiet());
            hung = client.transport().connect(ADDRESS, new Quiet()).localAddress();
            FakeFabricSupplier.current().freeze(hung);
            CountDownLatch closing = new CountDownLatch(1);
            closed = CompletableFuture.runAsync(() -> {
                closing.countDown();
                server.close();
            });
            assertTrue(closing.await(5, TimeUnit.SECONDS));
            Thread.sleep(200); // well into the server transport's close

            long start = System.nanoTime();
            try (RdmaRuntime.Lease other = RdmaRuntime.acquire(
                    TransportConfig.fromMap(Map.of("receiveSlots", "16")))) {
                long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                assertTrue(millis < 1000, "acquire waited " + millis + " ms for another transport's close");
            }
            closed.get(10, TimeUnit.SECONDS);
        } finally {
            client.close();
        }
        FakeFabricSupplier.current().thaw(hung);
    }
}
