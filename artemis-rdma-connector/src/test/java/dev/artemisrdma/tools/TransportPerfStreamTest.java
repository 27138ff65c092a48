package dev.artemisrdma.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.artemisrdma.transport.FakeFabric;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * RdmaPerf's transport stream end to end, client and server, over the in-memory fabric: a settled stream runs its
 * windows to the marked frames' acknowledgements, and the server's count at close agrees with the client's
 * messages_in_all; an unsettled one still ends at the count its hello announced.
 */
class TransportPerfStreamTest {

    private static final String SERVER = "10.77.0.1";
    private static final int PORT = 19001;
    private static final Pattern IN_ALL = Pattern.compile("(?m)^rdmaperf: messages_in_all=(\\d+)$");
    private static final Pattern SERVER_FRAMES = Pattern.compile("(?m)^rdmaperf server: \\S+ (\\d+) frames, loop stats");

    @Test
    void aSettledStreamRunsWindowsToTheMarkedFramesAndTheServerCountsThemAll() throws Exception {
        int warmup = 100;
        int iters = 3000;
        Run run = run("--mode", "bw", "--size", "1", "--iters", String.valueOf(iters), "--warmup",
                String.valueOf(warmup), "--settle", "3");
        assertEquals(iters, run.result.iters());
        assertTrue(run.result.messagesPerSecond() > 0, run.output);
        assertTrue(run.output.contains("\nrdmaperf: settle_s="), run.output);
        long inAll = number(IN_ALL, run.output);
        assertTrue(inAll >= warmup + iters && (inAll - warmup) % iters == 0,
                "the warm-up, whole rehearsals and the measured window: " + inAll);
        assertEquals(inAll, number(SERVER_FRAMES, run.output), "the server's count at close");
        assertTrue(run.output.contains(" messages=" + iters + "\n"), "CPU over the measured window: " + run.output);
    }

    @Test
    void anUnsettledStreamEndsAtItsAnnouncedCountAsBefore() throws Exception {
        Run run = run("--mode", "bw", "--size", "64", "--iters", "5000", "--warmup", "1000");
        assertTrue(run.output.contains("\nrdmaperf: settle=off\n"), run.output);
        assertEquals(6000, number(IN_ALL, run.output));
        assertEquals(6000, number(SERVER_FRAMES, run.output));
    }

    @Test
    void aSettledPingPongStillEchoes() throws Exception {
        Run run = run("--mode", "lat", "--size", "64", "--iters", "500", "--warmup", "100", "--settle", "2");
        assertTrue(run.output.contains("\nrdmaperf: settle_s="), run.output);
        long inAll = number(IN_ALL, run.output);
        assertTrue(inAll >= 600 && (inAll - 100) % 500 == 0, "round trips in all: " + inAll);
        assertEquals(inAll, number(SERVER_FRAMES, run.output));
    }

    private record Run(PerfResult result, String output) {
    }

    /** One client run against a server on a fresh fake fabric; the output of both, the server's close included. */
    private static Run run(String... clientArgs) throws Exception {
        String[] base = {"client", "--connect", SERVER, "--port", String.valueOf(PORT), "--layer", "transport"};
        String[] all = java.util.Arrays.copyOf(base, base.length + clientArgs.length);
        System.arraycopy(clientArgs, 0, all, base.length, clientArgs.length);
        PerfOptions options = PerfOptions.parse(all);
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream original = System.out;
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try (FakeFabric fabric = new FakeFabric()) {
            AutoCloseable server = TransportPerf.listen(fabric, new InetSocketAddress(SERVER, PORT));
            try {
                PerfResult result = TransportPerf.run(fabric, options);
                // the server prints its count when it sees the client's close, on its own loop
                long deadline = System.nanoTime() + 10_000_000_000L;
                while (!SERVER_FRAMES.matcher(text(captured)).find() && System.nanoTime() < deadline) {
                    Thread.sleep(10);
                }
                fabric.assertNoViolations();
                return new Run(result, text(captured));
            } finally {
                server.close();
            }
        } finally {
            System.setOut(original);
            System.out.print(text(captured));
        }
    }

    private static String text(ByteArrayOutputStream captured) {
        synchronized (captured) {
            return captured.toString(StandardCharsets.UTF_8);
        }
    }

    private static long number(Pattern pattern, String output) {
        Matcher m = pattern.matcher(output);
        assertTrue(m.find(), pattern + " not in:\n" + output);
        return Long.parseLong(m.group(1));
    }
}
