package dev.artemisrdma.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.verbs.VerbsFabric;

/**
 * Server and client transports on one real fabric with N connections through rxe1, the busy ones streaming 1 KiB
 * frames: the load that the fault tests break. Each end records when and why it closed.
 */
public final class LoadedConnections implements AutoCloseable {

    /** How long a port or device fault may take to fail every connection on it. */
    public static final long FAIL_BOUND_MILLIS = 5_000;

    public static TransportConfig config() {
        return TransportConfig.defaults().toBuilder().receiveSlots(16).slotSize(4096)
                .connectTimeout(java.time.Duration.ofSeconds(5)).build();
    }

    /** One end of a connection: counts frames, records when and why it closed. */
    public static final class End implements ChannelHandler {
        final AtomicLong frames = new AtomicLong();
        /** Completes with the cause, or null after a local close. */
        public final CompletableFuture<FabricException> closed = new CompletableFuture<>();
        public volatile long closedAtNanos;
        /** How many times onClosed was called (once, or the transport is wrong). */
        public final AtomicInteger closedCalls = new AtomicInteger();
        private final CountDownLatch removal;

        public End() {
            this(null);
        }

        /** Counts {@code removal} down when this end fails because its device was removed. */
        End(CountDownLatch removal) {
            this.removal = removal;
        }

        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            frames.incrementAndGet();
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
            if (closedCalls.incrementAndGet() > 1) {
                System.out.println("LoadedConnections: onClosed called again on " + channel.id() + " (" + cause + ")");
                return;
            }
            closedAtNanos = System.nanoTime();
            if (removal != null && cause != null && String.valueOf(cause.getMessage()).contains("was removed")) {
                removal.countDown();
            }
            closed.complete(cause);
        }
    }

    /** Writes 1 KiB frames to {@code channels}, whichever is writable, until none is open. */
    private static Thread traffic(List<RdmaChannel> channels, String name) {
        Thread t = new Thread(() -> {
            ByteBuffer frame = ByteBuffer.allocate(1024);
            List<RdmaChannel> open = new ArrayList<>(channels);
            while (!open.isEmpty()) {
                boolean wrote = false;
                for (int i = open.size() - 1; i >= 0; i--) {
                    RdmaChannel channel = open.get(i);
                    try {
                        if (!channel.isOpen()) {
                            open.remove(i);
                        } else if (channel.isWritable()) {
                            channel.write(frame.clear(), true);
                            wrote = true;
                        }
                    } catch (FabricException | IllegalStateException e) {
                        open.remove(i);
                    }
                }
                if (!wrote) {
                    try {
                        Thread.sleep(1);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }
        }, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    public final VerbsFabric fabric = new VerbsFabric();
    public final RdmaTransport serverTransport;
    public final RdmaTransport clientTransport;
    /** Open until the first end fails because its device was removed. */
    public final CountDownLatch firstRemoval = new CountDownLatch(1);
    private final List<End> ends = new ArrayList<>();
    private final List<End> serverEnds = new ArrayList<>();
    final List<RdmaChannel> clients = new ArrayList<>();
    public final RdmaServer server;
    long slowestMillis;

    /**
     * {@code busy} connections with traffic, {@code idle} without (only a device event can fail those fast). With
     * {@code oneWriter} a single thread writes to all busy connections, else each has a writer of its own.
     */
    public LoadedConnections(int busy, int idle, boolean oneWriter) throws Exception {
        this(config(), busy, idle, oneWriter);
    }

    /** The same with both transports on {@code config}. */
    public LoadedConnections(TransportConfig config, int busy, int idle, boolean oneWriter) throws Exception {
        serverTransport = RdmaTransport.create(fabric, config);
        clientTransport = RdmaTransport.create(fabric, config);
        try {
            server = serverTransport.listen(Lab.address(Lab.addr1(), Lab.freshPort()), ch -> newEnd(true));
            connect(busy, idle, oneWriter);
        } catch (Exception | AssertionError e) {
            close();
            throw e;
        }
    }

    private void connect(int busy, int idle, boolean oneWriter) throws Exception {
        int connections = busy + idle;
        for (int i = 0; i < connections; i++) {
            RdmaChannel c = clientTransport.connect(server.localAddress(), newEnd(false));
            clients.add(c);
            if (i < busy && !oneWriter) {
                traffic(List.of(c), "traffic-" + c.id());
            }
        }
        if (oneWriter && busy > 0) {
            traffic(clients.subList(0, busy), "traffic-" + busy);
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (totalFrames() < 100L * busy && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertTrue(totalFrames() >= 100L * busy, "traffic flows before the fault: " + totalFrames());
        while (ends().size() < 2 * connections && System.nanoTime() < deadline + TimeUnit.SECONDS.toNanos(10)) {
            Thread.sleep(10);
        }
        assertEquals(2 * connections, ends().size(), "both ends of every connection");
    }

    private End newEnd(boolean atServer) {
        End e = new End(firstRemoval);
        synchronized (ends) {
            ends.add(e);
            if (atServer) {
                serverEnds.add(e);
            }
        }
        return e;
    }

    /** The ends of the server transport ({@code true}) or of the client transport. */
    public List<End> ends(boolean atServer) {
        synchronized (ends) {
            List<End> those = new ArrayList<>(ends);
            those.removeIf(e -> serverEnds.contains(e) != atServer);
            return those;
        }
    }

    /** Both ends of every connection so far. */
    public List<End> ends() {
        synchronized (ends) {
            return new ArrayList<>(ends);
        }
    }

    long totalFrames() {
        return ends().stream().mapToLong(s -> s.frames.get()).sum();
    }

    /**
     * Waits until every end failed (each with a cause, none a local close); returns the causes and sets
     * {@link #slowestMillis} to the slowest, after {@code startNanos}.
     */
    List<String> awaitAllFailed(long startNanos) throws Exception {
        List<String> causes = new ArrayList<>();
        long slowest = 0;
        for (End s : ends()) {
            FabricException cause = s.closed.get(FAIL_BOUND_MILLIS + 5_000, TimeUnit.MILLISECONDS);
            assertNotNull(cause, "a fault is a failure with a cause, not a local close");
            causes.add(cause.getMessage());
            slowest = Math.max(slowest, TimeUnit.NANOSECONDS.toMillis(s.closedAtNanos - startNanos));
        }
        slowestMillis = slowest;
        return causes;
    }

    /** A fresh connection carries frames (retried while rxe1 comes back). */
    long connectAgain(long boundMillis) throws Exception {
        return connectAgain(clientTransport, serverTransport, server, boundMillis);
    }

    /** A fresh connection to {@code server} carries a frame (retried while rxe1 comes back). */
    static long connectAgain(RdmaTransport clientTransport, RdmaTransport serverTransport, RdmaServer server,
                             long boundMillis) throws Exception {
        long start = System.nanoTime();
        long deadline = start + TimeUnit.MILLISECONDS.toNanos(boundMillis);
        FabricException last = null;
        while (System.nanoTime() < deadline) {
            try {
                RdmaChannel c = clientTransport.connect(server.localAddress(), new End());
                c.write(ByteBuffer.wrap(new byte[] {1, 2, 3}), true);
                long frameDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (serverTransport.channelCount() == 0 && System.nanoTime() < frameDeadline) {
                    Thread.sleep(5);
                }
                c.close();
                return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            } catch (FabricException e) {
                if (last == null || !String.valueOf(last.getMessage()).equals(e.getMessage())) {
                    System.out.println("LoadedConnections: connecting again after "
                            + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) + " ms: " + e.getMessage()
                            + "; gids " + RxeDevice.gids());
                }
                last = e;
                Thread.sleep(200);
            }
        }
        throw new AssertionError("no new connection within " + boundMillis + " ms; last: " + last, last);
    }

    @Override
    public void close() {
        clientTransport.close();
        serverTransport.close();
        fabric.close();
    }
}
