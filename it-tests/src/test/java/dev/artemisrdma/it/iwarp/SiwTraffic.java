package dev.artemisrdma.it.iwarp;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The proof that soft-iWARP carried a test's traffic: siw has no hardware counters, but its queue pairs run over
 * kernel TCP connections, whose byte counts ({@code ss -tin}) on the acceptor's port move with every SEND.
 */
public final class SiwTraffic {

    private static final Pattern BYTES_SENT = Pattern.compile("bytes_sent:(\\d+)");

    private SiwTraffic() {
    }

    /** Whether this lab runs siw devices (rdma-lab run --fabric siw). */
    public static boolean inSiwLab() throws IOException, InterruptedException {
        return sh("rdma link show").contains("siw");
    }

    /**
     * What siw's TCP connections to and from {@code port} have sent so far (ss needs tcp_diag, which the lab loads).
     */
    public static long siwBytes(int port) throws IOException, InterruptedException {
        String out = sh("ss -tinH state established '( sport = :" + port + " or dport = :" + port + " )'");
        long sum = 0;
        Matcher m = BYTES_SENT.matcher(out);
        while (m.find()) {
            sum += Long.parseLong(m.group(1));
        }
        return sum;
    }

    static String sh(String command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder("bash", "-c", command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        p.waitFor(30, TimeUnit.SECONDS);
        return out;
    }
}
