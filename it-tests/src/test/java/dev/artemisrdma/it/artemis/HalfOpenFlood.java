package dev.artemisrdma.it.artemis;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.verbs.IbvCompletionQueue;
import dev.artemisrdma.verbs.QueuePairCapabilities;
import dev.artemisrdma.verbs.RdmaCmId;
import dev.artemisrdma.verbs.RdmaDevice;
import dev.artemisrdma.verbs.RdmaDevices;
import dev.artemisrdma.verbs.RdmaEventChannel;
import dev.artemisrdma.verbs.VerbsException;

/**
 * A connection flood on the bare verbs binding: each attempt resolves the route, builds the smallest queue pair that
 * rdma_connect accepts (one work request each way, no memory: it never sends or receives) and sends a connect request
 * with a valid handshake, and is then left alone. Its event channel is never read again, so librdmacm never answers
 * the server's accept with the RTU: on the server's side the connection never becomes established, and a request
 * the server refuses is never even looked at. Costs this process one event channel, cm id and queue pair per
 * attempt, all kept until {@link #close()}; the attempts share one completion queue on the device of the first (nothing ever completes; a flood goes to
 * one address).
 */
final class HalfOpenFlood implements AutoCloseable {

    private final RdmaDevices devices;
    private final List<Attempt> attempts = new ArrayList<>();
    private IbvCompletionQueue cq;

    HalfOpenFlood(RdmaDevices devices) {
        this.devices = devices;
    }

    /** One more attempt to {@code host:port}; returns once its connect request left. */
    void attempt(String host, int port, byte[] handshake) throws VerbsException {
        attempt(null, host, port, handshake);
    }

    /** As {@link #attempt(String, int, byte[])}, from the local address {@code source} (null: the route's). */
    void attempt(String source, String host, int port, byte[] handshake) throws VerbsException {
        RdmaEventChannel events = new RdmaEventChannel();
        RdmaCmId id = null;
        try {
            id = RawVerbsPeer.resolved(events, source, host, port);
            RdmaDevice device = id.device(devices);
            if (cq == null) {
                cq = device.createCompletionQueue(16);
            }
            id.createQueuePair(device, cq, cq, new QueuePairCapabilities(1, 1, 1, 1, 0));
            id.connect(handshake, 7, 7);
            attempts.add(new Attempt(events, id));
        } catch (VerbsException | RuntimeException e) {
            if (id != null) {
                id.close();
            }
            events.close();
            throw e;
        }
    }

    /** The local address of the first attempt: the flood's source, as the server sees it. */
    String sourceHost() {
        return attempts.isEmpty() ? "?" : attempts.get(0).id.localAddress().getAddress().getHostAddress();
    }

    /**
     * Destroys every attempt's id (with its queue pair) and channel, 32 at a time: rdma_destroy_id may wait for the
     * kernel's CM (a minute for an unlucky id), and one such must not hold the rest. Returns whether all were
     * destroyed within {@code seconds}.
     */
    boolean close(long seconds) throws InterruptedException {
        ExecutorService closers = Executors.newFixedThreadPool(32);
        for (Attempt a : attempts) {
            closers.execute(() -> {
                a.id.close();
                a.events.close();
            });
        }
        attempts.clear();
        closers.shutdown();
        boolean done = closers.awaitTermination(seconds, TimeUnit.SECONDS);
        if (done && cq != null) {
            cq.close();
            cq = null;
        }
        return done;
    }

    @Override
    public void close() throws InterruptedException {
        close(120);
    }

    private record Attempt(RdmaEventChannel events, RdmaCmId id) {
    }
}
