package dev.artemisrdma.it.artemis;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import dev.artemisrdma.verbs.RdmaDevices;

/**
 * A connection flood from the host this runs on (the two-host lab's B): {@code COUNT} connection requests to
 * {@code HOST:PORT} as fast as this process makes them, with our handshake, never finished by us ({@link HalfOpenFlood}:
 * the kernel completes some, the rest stay half open). Prints {@code MADE N} every 250 and {@code FLOODED N IN MS} at
 * the end, then holds every attempt until its stdin closes, when it destroys them and prints {@code RELEASED}.
 */
public final class FloodMain {

    public static final String FLOODED = "FLOODED";

    private FloodMain() {
    }

    public static void main(String[] args) throws Exception {
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        int count = Integer.parseInt(args[2]);
        try (RdmaDevices devices = RdmaDevices.open(); HalfOpenFlood flood = new HalfOpenFlood(devices)) {
            byte[] handshake = RawVerbsPeer.honestHandshake();
            long start = System.nanoTime();
            int made = 0;
            int failed = 0;
            for (int i = 0; i < count; i++) {
                try {
                    flood.attempt(host, port, handshake);
                    made++;
                } catch (Exception e) {
                    failed++; // the flooder's own limits (its event channels, memlock): it goes on as it can
                }
                if (i % 250 == 249) {
                    System.out.println("MADE " + made + " failed " + failed);
                }
            }
            System.out.println(FLOODED + " " + made + " IN " + (System.nanoTime() - start) / 1_000_000 + " ms ("
                    + failed + " failed, from " + flood.sourceHost() + ")");
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                while (in.readLine() != null) {
                    // held until the driver closes stdin
                }
            }
            System.out.println(flood.close(120) ? "RELEASED" : "FAILED to destroy the flood's ids within 120 s");
        }
    }
}
