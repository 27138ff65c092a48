package dev.artemisrdma.it.artemis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.Lab;
import dev.artemisrdma.it.hosts.LabHost;
import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.verbs.VerbsFabric;

/**
 * A connection flood from host B at the fastest rate B makes requests (issue 37 item 1), against a listener on A
 * with the defaults: meanwhile a client from another address (A's own) connects 20 times, each within 1 s. Before,
 * the flood filled the kernel's listen backlog and first copies were dropped before anyone looked at their source,
 * and the honest client waited for rdma_cm's retry (8.5 s, once a failure after 10 s). Now the event thread reads
 * every request into queues by source host and serves one per host per round. Afterwards the listener holds nothing
 * for the flood once handshakeTimeout has passed and the flood's ids are gone.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class CrossWireFloodLabTest {

    private static final int FLOOD = 4_000;
    private static final int HONEST_CONNECTS = 20;
    private static final long WITHIN_MILLIS = 1_000;

    @Test
    void aFloodFromHostBDoesNotDelayAClientFromAnotherAddress() throws Exception {
        try (Listener a = Listener.onA()) {
            List<Long> before = a.connects(5);
            try (JavaProcess flood = JavaProcess.driven("flood-from-b", FloodMain.class).on(LabHost.b())
                    .jvm("-Xmx512m").start(LabHost.a().wireAddress(), String.valueOf(a.port), String.valueOf(FLOOD))) {
                flood.await("MADE", 300);
                List<Long> during = a.connects(HONEST_CONNECTS);
                String flooded = flood.await(FloodMain.FLOODED, 300);
                long refused = a.listening.stats().refused();
                System.out.printf("flood lab: %s; the listener refused %d and accepted %d; a client from %s "
                        + "connected in %s ms before the flood and %s ms during it%n", flooded, refused,
                        a.listening.stats().accepted(), LabHost.a().wireAddress(), before, during);
                for (long ms : during) {
                    assertTrue(ms <= WITHIN_MILLIS, "a connect from another address took " + ms + " ms during the "
                            + "flood (all: " + during + "; " + flooded + ")");
                }
                assertTrue(refused > 0, "the flood met the per-source caps: " + flooded);
                flood.closeInput();
                assertTrue(flood.await("RELEASED", 200) != null, "the flood's ids destroyed on B");
                assertTrue(flood.awaitExit(60));
            }
            // what the listener accepted for the flood ends at its handshake deadline or with the flood's ids
            a.awaitNoChannels("the listener still holds connections of the flood");
            List<Long> after = a.connects(5);
            for (long ms : after) {
                assertTrue(ms <= WITHIN_MILLIS, "after the flood a connect took " + ms + " ms: " + after);
            }
        }
    }

    /**
     * Issue 37 hole 1: one host (B) opens 600 connections and keeps them, with the defaults
     * (maxConnectionsPerSource 512): the listener holds 512 and refuses the rest naming the key, a client from another
     * address still connects within 1 s, and once B closes them the listener is back to none.
     */
    @Test
    void oneHostHoldsAtMostMaxConnectionsPerSourceAndOthersStillConnect() throws Exception {
        try (Listener a = Listener.onA()) {
            try (JavaProcess many = JavaProcess.driven("many-from-b", ManyConnectionsMain.class).on(LabHost.b())
                    .jvm("-Xmx512m").start(LabHost.a().wireAddress(), String.valueOf(a.port), "600")) {
                String opened = many.await(ManyConnectionsMain.OPENED, 400);
                int held = a.server.channelCount();
                List<Long> during = a.connects(10);
                System.out.printf("many connections lab: host B %s; the listener holds %d; a client from %s "
                        + "connected in %s ms meanwhile%n", opened, held, LabHost.a().wireAddress(), during);
                int cap = TransportConfig.defaults().maxConnectionsPerSource();
                assertTrue(opened.startsWith(ManyConnectionsMain.OPENED + " " + cap
                        + " REFUSED 88 FIRST-REFUSAL "), opened);
                assertTrue(opened.contains("maxConnectionsPerSource"), opened);
                assertEquals(cap, held, "connections the listener holds for host B");
                for (long ms : during) {
                    assertTrue(ms <= WITHIN_MILLIS, "a connect from another address took " + ms + " ms: " + during);
                }
                many.closeInput();
                many.await("CLOSED", 300);
                assertTrue(many.awaitExit(120));
            }
            a.awaitNoChannels("the listener still holds host B's connections");
        }
    }

    /**
     * A listener on A's wire address with the defaults, and a transport of A's own that connects to it from another
     * address than host B's: the well-behaved client.
     */
    private record Listener(VerbsFabric fabric, RdmaTransport server, RdmaTransport honest, RdmaServer listening,
                            int port) implements AutoCloseable {

        static Listener onA() throws FabricException {
            int port = Lab.freshPort();
            VerbsFabric fabric = new VerbsFabric();
            RdmaTransport server = null;
            RdmaTransport honest = null;
            try {
                server = RdmaTransport.create(fabric, TransportConfig.defaults());
                honest = RdmaTransport.create(fabric, TransportConfig.defaults());
                RdmaServer listening = server.listen(new InetSocketAddress(LabHost.a().wireAddress(), port),
                        channel -> new Peers.Recorder());
                return new Listener(fabric, server, honest, listening, port);
            } catch (FabricException | RuntimeException e) {
                new Listener(fabric, server, honest, null, port).close();
                throw e;
            }
        }

        /** {@code n} connects of the honest client, each closed at once; their times in milliseconds. */
        List<Long> connects(int n) throws FabricException, InterruptedException {
            List<Long> times = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                long t0 = System.nanoTime();
                RdmaChannel ch = honest.connect(listening.localAddress(), new Peers.Recorder());
                times.add(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
                ch.close();
                Thread.sleep(50);
            }
            return times;
        }

        /** Waits up to 60 s until the listener holds no connection, failing with {@code why} when it still does. */
        void awaitNoChannels(String why) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (server.channelCount() > 0 && System.nanoTime() < deadline) {
                Thread.sleep(200);
            }
            assertEquals(0, server.channelCount(), why);
        }

        @Override
        public void close() {
            if (honest != null) {
                honest.close();
            }
            if (server != null) {
                server.close();
            }
            fabric.close();
        }
    }
}
