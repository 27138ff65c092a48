package dev.artemisrdma.it.artemis;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.transport.wire.FrameHeader;
import dev.artemisrdma.verbs.RdmaDevices;

/**
 * The attacker of {@link CrossWireAttacksLabTest} on host B: raw verbs peers ({@link RawVerbsPeer},
 * {@link HalfOpenFlood}), driven by one command per line on stdin, each answered by one line (a line starting with
 * {@code FAILED} when it could not be done). What a command opened is kept until {@code release}.
 * <ul>
 *   <li>{@code squat HOST PORT IDLE IDLE_BYTES SQUATTERS SQUAT_BYTES}: issue 37 hole 2. IDLE peers each send one whole
 *       fragmented frame of IDLE_BYTES (a Core PING the broker reads, so the connection stays and its reassembly
 *       buffer is kept between frames), then SQUATTERS peers each send all but the last byte of a frame of
 *       SQUAT_BYTES and stop there. Answers {@code SQUATTING ...}.</li>
 *   <li>{@code pending HOST PORT PER_ADDRESS ADDR,ADDR,... [SPREAD_MS]}: hole 3. PER_ADDRESS connection requests from
 *       each local address, taking the addresses in turn, never finished (no RTU), as fast as they can be made or
 *       spread evenly over SPREAD_MS. Prints {@code MADE n} at half way, answers {@code PENDING ...}.</li>
 *   <li>{@code drop HOST PORT MAX}: hole 4. Up to MAX peers, in batches of 32: each peer of a batch connects, then each
 *       sends a frame the broker must close it for, then each waits until the broker's DREQ arrived (the test drops
 *       this host's CM replies meanwhile); stops at the first refusal. Answers {@code DROP admitted N refused M first-refusal REASON ...}.</li>
 *   <li>{@code release}: destroys everything, 32 at a time, at most 120 s; answers {@code RELEASED ...}.</li>
 * </ul>
 * End of stdin: release and exit.
 */
public final class WireAttackerMain {

    private static final long CORE_TTL_MILLIS = 60_000;
    /** Peers of the {@code drop} attack whose closes are provoked together. */
    private static final int DROP_BATCH = 32;

    private final RdmaDevices devices;
    private final List<RawVerbsPeer> peers = new ArrayList<>();
    private final List<HalfOpenFlood> floods = new ArrayList<>();

    private WireAttackerMain(RdmaDevices devices) {
        this.devices = devices;
    }

    public static void main(String[] args) throws Exception {
        try (RdmaDevices devices = RdmaDevices.open()) {
            WireAttackerMain attacker = new WireAttackerMain(devices);
            System.out.println("READY");
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                String[] a = line.trim().split(" ");
                try {
                    switch (a[0]) {
                        case "squat" -> attacker.squat(a[1], Integer.parseInt(a[2]), Integer.parseInt(a[3]),
                                Integer.parseInt(a[4]), Integer.parseInt(a[5]), Integer.parseInt(a[6]));
                        case "pending" -> attacker.pending(a[1], Integer.parseInt(a[2]), Integer.parseInt(a[3]),
                                a[4].split(","), a.length > 5 ? Long.parseLong(a[5]) : 0);
                        case "drop" -> attacker.drop(a[1], Integer.parseInt(a[2]), Integer.parseInt(a[3]));
                        case "release" -> attacker.release();
                        default -> System.out.println("FAILED unknown command " + line);
                    }
                } catch (Exception e) {
                    System.out.println("FAILED " + line + ": " + e);
                }
                System.out.flush();
            }
            attacker.release();
        }
        System.out.flush();
        Runtime.getRuntime().halt(0); // an id the kernel still holds must not keep this JVM
    }

    private void squat(String host, int port, int idle, int idleBytes, int squatters, int squatBytes)
            throws Exception {
        long t0 = System.nanoTime();
        List<RawVerbsPeer> idlers = new ArrayList<>();
        for (int i = 0; i < idle; i++) {
            idlers.add(connected(host, port));
        }
        for (RawVerbsPeer p : idlers) {
            sendPing(p, idleBytes);
        }
        List<RawVerbsPeer> squatting = new ArrayList<>();
        for (int i = 0; i < squatters; i++) {
            squatting.add(connected(host, port));
        }
        int payload = squatting.get(0).fragmentPayload();
        for (RawVerbsPeer p : squatting) {
            p.fragment(true, false, squatBytes, payload);
            int offset = payload;
            for (; offset + payload < squatBytes - 1; offset += payload) {
                p.fragment(false, false, offset, payload);
            }
            if (squatBytes - 1 - offset > 0) {
                p.fragment(false, false, offset, squatBytes - 1 - offset); // all but the frame's last byte
            }
        }
        int lost = 0;
        for (RawVerbsPeer p : idlers) {
            lost += p.lostNow() ? 1 : 0;
        }
        System.out.println("SQUATTING " + idle + " idle peers sent a whole frame of " + idleBytes + " bytes, "
                + squatters + " squatters hold " + (squatBytes - 1) + " bytes of a " + squatBytes + "-byte frame each, "
                + "fragments of " + payload + " bytes, in " + millis(t0) + " ms; idle peers the broker closed " + lost
                + "; from " + squatting.get(0).localAddress());
    }

    /**
     * A Core PING (channel 0, connection TTL 60 s) of {@code bytes} in fragments: the broker reads the PING and
     * ignores the zeros after it, so the connection stays and the frame's buffer is kept for its next frame.
     */
    private static void sendPing(RawVerbsPeer p, int bytes) throws Exception {
        int payload = p.fragmentPayload();
        ByteBuffer head = ByteBuffer.allocate(payload);
        head.putInt(bytes - 4).put((byte) 10).putLong(0).putLong(CORE_TTL_MILLIS); // PacketImpl.PING
        p.fragment(true, false, bytes, head.array());
        int offset = payload;
        for (; offset + payload < bytes; offset += payload) {
            p.fragment(false, false, offset, payload);
        }
        p.fragment(false, true, offset, bytes - offset);
    }

    private RawVerbsPeer connected(String host, int port) throws Exception {
        RawVerbsPeer p = RawVerbsPeer.open(devices, host, port);
        peers.add(p);
        p.connect(RawVerbsPeer.honestHandshake());
        return p;
    }

    private void pending(String host, int port, int perAddress, String[] sources, long spreadMillis)
            throws Exception {
        HalfOpenFlood flood = new HalfOpenFlood(devices);
        floods.add(flood);
        byte[] handshake = RawVerbsPeer.honestHandshake();
        int total = perAddress * sources.length;
        int made = 0;
        int failed = 0;
        String firstFailure = "none";
        long t0 = System.nanoTime();
        for (int i = 0; i < total; i++) {
            long due = t0 + TimeUnit.MILLISECONDS.toNanos(spreadMillis * i / total); // 0: as fast as it can
            long wait = due - System.nanoTime();
            if (wait > 0) {
                TimeUnit.NANOSECONDS.sleep(wait);
            }
            try {
                flood.attempt(sources[i % sources.length], host, port, handshake);
                made++;
            } catch (Exception e) {
                if (failed++ == 0) {
                    firstFailure = e.getMessage();
                }
            }
            if (i == total / 2) {
                System.out.println("MADE " + made);
                System.out.flush();
            }
        }
        System.out.println("PENDING made " + made + " failed " + failed + " in " + millis(t0) + " ms from "
                + sources.length + " addresses (" + sources[0] + " ... " + sources[sources.length - 1]
                + "); first failure: " + firstFailure);
    }

    private void drop(String host, int port, int max) throws Exception {
        long t0 = System.nanoTime();
        int admitted = 0;
        int notClosed = 0;
        String refusal = "none";
        // in batches, every peer of a batch connected before any provokes its close: the broker then sends a batch's
        // DREQs at once, and destroys the ids as soon as their queue pairs are drained. rdma_destroy_id cancels a DREQ
        // that waits for its reply, but not one still queued to be sent (ib_cancel_mad looks for it only among those
        // waiting), which then runs its retries, about 66 s, before the destroy returns: one at a time, the DREQ is
        // long sent before the destroy comes, and the ids never wait
        List<RawVerbsPeer> batch = new ArrayList<>();
        while (admitted < max && refusal.equals("none")) {
            batch.clear();
            while (batch.size() < DROP_BATCH && admitted < max) {
                RawVerbsPeer p = RawVerbsPeer.open(devices, host, port);
                peers.add(p);
                try {
                    p.connect(RawVerbsPeer.honestHandshake());
                } catch (RawVerbsPeer.Rejected rejected) {
                    refusal = rejected.getMessage();
                    break;
                }
                admitted++;
                batch.add(p);
            }
            for (RawVerbsPeer p : batch) {
                // a continuation without a first fragment: a protocol error the broker closes the connection for
                p.send(RawVerbsPeer.frame(0, 0, 0, 64), false);
            }
            for (RawVerbsPeer p : batch) {
                if (!p.awaitLost(10_000)) {
                    notClosed++;
                }
            }
        }
        System.out.println("DROP admitted " + admitted + " refused " + (refusal.equals("none") ? 0 : 1)
                + " not-closed " + notClosed + " in " + millis(t0) + " ms first-refusal " + refusal);
    }

    private void release() throws InterruptedException {
        long t0 = System.nanoTime();
        int n = peers.size();
        ExecutorService closers = Executors.newFixedThreadPool(32);
        for (RawVerbsPeer p : peers) {
            closers.execute(p::close);
        }
        peers.clear();
        closers.shutdown();
        boolean peersGone = closers.awaitTermination(120, TimeUnit.SECONDS);
        boolean floodsGone = true;
        for (HalfOpenFlood f : floods) {
            floodsGone &= f.close(120);
        }
        floods.clear();
        System.out.println("RELEASED " + n + " peers " + (peersGone && floodsGone ? "and every flood" : "NOT ALL")
                + " in " + millis(t0) + " ms");
    }

    private static long millis(long t0) {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    }
}
