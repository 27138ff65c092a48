package dev.artemisrdma.it.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.TlsStores;
import dev.artemisrdma.it.artemis.LabBroker;
import dev.artemisrdma.it.hosts.LabHost;
import dev.artemisrdma.it.hosts.WireCounters;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * TLS over RDMA between two hosts: a broker on host A with a plain RDMA acceptor and TLS acceptors beside it (one that
 * needs a client certificate, one whose certificate names another host), JMS clients on host B configured with the
 * same keys as Artemis's Netty transport. A trusted client is served with every message exactly once across the
 * wire; a client without a certificate, one that does not trust the broker, one that finds the broker's certificate
 * naming another host, and a plain client at the TLS port are each refused, saying why; verifyHost and sniHost
 * decide as on Artemis's Netty transport (Netty TLS acceptors with the same keys beside the RDMA ones, the same client
 * cases against both); a capture of host A's NIC finds a 1 KiB pattern in the plain connection's packets and not in
 * the TLS connection's.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class TlsLabTest {

    private static final int PLAIN = 61641;
    private static final int TLS = 61642;
    private static final int WRONG_NAME = 61643;
    /** An RDMA TLS acceptor with sniHost: it takes only clients that ask for {@link #SNI_NAME}. */
    private static final int SNI = 61644;
    /** Netty TLS acceptors with the same keys as TLS, WRONG_NAME and SNI, for the side-by-side comparison. */
    private static final int NETTY_TLS = 61652;
    private static final int NETTY_WRONG_NAME = 61653;
    private static final int NETTY_SNI = 61654;
    /** The name the SNI acceptors require; the broker's certificate does not hold it (an acceptor does not check). */
    private static final String SNI_NAME = "broker.artemis-rdma.test";

    private static LabBroker broker;

    static Map<String, String> tlsAcceptor(int port, String key, boolean needClientAuth) {
        Map<String, String> p = new LinkedHashMap<>(TlsStores.acceptor(key, needClientAuth));
        p.put("port", Integer.toString(port));
        // a cold JVM's first handshake runs the JDK's elliptic-curve code unoptimised, under emulation: 10 s were
        // seen to be too short on a loaded lab host
        p.put("sslHandshakeTimeout", "60");
        return p;
    }

    /** A TLS client URL to {@code port} on host A: {@code key} null for no client certificate. */
    static String tlsUrl(int port, String key, String trust, String more) {
        String query = TlsStores.query(key).replace(TlsStores.path("trust"), TlsStores.path(trust));
        return "rdma://" + LabHost.a().wireAddress() + ":" + port + "?" + query.substring(1) + "&connectTimeout=60000"
                + more;
    }

    @BeforeAll
    static void startBroker() throws Exception {
        LabHost.requireTwoHosts();
        Map<String, String> sni = new LinkedHashMap<>(tlsAcceptor(SNI, "broker", false));
        sni.put("sniHost", SNI_NAME);
        Map<String, String> nettySni = new LinkedHashMap<>(tlsAcceptor(NETTY_SNI, "broker", false));
        nettySni.put("sniHost", SNI_NAME);
        broker = LabBroker.start(LabHost.a().wireAddress(), PLAIN, Files.createTempDirectory("tls-broker"), true, 0,
                Map.of(), Map.of("rdma-tls", tlsAcceptor(TLS, "broker", true),
                        "rdma-tls-wrong-name", tlsAcceptor(WRONG_NAME, "broker-wrongname", false),
                        "rdma-tls-sni", sni),
                Map.of("tcp-tls", tlsAcceptor(NETTY_TLS, "broker", true),
                        "tcp-tls-wrong-name", tlsAcceptor(NETTY_WRONG_NAME, "broker-wrongname", false),
                        "tcp-tls-sni", nettySni));
    }

    @AfterAll
    static void stopBroker() throws Exception {
        if (broker != null) {
            broker.close();
        }
    }

    @Test
    void aTrustedClientIsServedExactlyOnceAcrossTheWire() throws Exception {
        int count = 200;
        WireCounters a0 = LabHost.a().counters();
        WireCounters b0 = LabHost.b().counters();
        try (JavaProcess client = JavaProcess.driven("tls.jms", WireJmsMain.class).on(LabHost.b()).jvm("-Xmx768m")
                .echo(line -> line.startsWith("RESULT") || line.startsWith("FAILED") || line.contains("WARN"), 20)
                .start(tlsUrl(TLS, "client", "trust", ""), "tls.jms", Integer.toString(count), "21")) {
            Map<String, Long> r = WireJmsMain.result(client.await("RESULT", 540));
            WireCounters a = LabHost.a().counters().since(a0);
            WireCounters b = LabHost.b().counters().since(b0);
            String what = r + "; " + a.summary() + "; " + b.summary();
            System.out.println("tls.jms: " + what);
            assertEquals(count, r.get("received"), what);
            assertEquals(0, r.get("lost") + r.get("duplicated") + r.get("bad") + r.get("failures"), what);
            a.requireRoceCrossedTheWire(count);
            b.requireRoceCrossedTheWire(count);
        }
    }

    @Test
    void clientsThatFailTheChecksAreRefusedSayingWhy() throws Exception {
        // each as Artemis's Netty transport refuses it, the reason in the client's log
        assertRefused("no client certificate (needClientAuth)", tlsUrl(TLS, null, "trust", ""),
                "certificate_required", "bad_certificate");
        assertRefused("a client that does not trust the broker", tlsUrl(TLS, "client", "other-trust", ""),
                "PKIX", "certification path", "unable to find valid");
        assertRefused("a broker certificate naming another host (verifyHost)",
                tlsUrl(WRONG_NAME, "client", "trust", ""), "No subject alternative", "No name matching");
        assertRefused("a plain client at the TLS port", "rdma://" + LabHost.a().wireAddress() + ":" + TLS,
                "sslEnabled=true");
        assertRefused("a TLS client at the plain port", tlsUrl(PLAIN, "client", "trust", ""), "sslEnabled");
        // the same broker certificate is accepted once the client does not verify the host name, as on Netty
        assertEquals("SERVED", probe("tls.noverify", tlsUrl(WRONG_NAME, "client", "trust", "&verifyHost=false"))
                .get(0));
        // and the plain acceptor beside the TLS ones still serves plain clients
        assertEquals("SERVED", probe("tls.plain", "rdma://" + LabHost.a().wireAddress() + ":" + PLAIN).get(0));
    }

    /**
     * verifyHost and sniHost over RDMA as over Artemis's Netty transport, each case run by one client JVM on host B
     * against an RDMA TLS acceptor and a Netty TLS acceptor on A with the same keys: the same verdict, the same JDK
     * reason in the client's log and the same exception. What the JDK does with them (Artemis hands both to its
     * SSLEngine): with verifyHost the certificate must name the sniHost or, failing that, the address the client
     * dialled; an acceptor without sniHost ignores the name a client asks for; one with sniHost refuses a client that
     * asks for another name (unrecognized_name) and takes one that asks for none (a client that dials an IP address
     * and has no sniHost sends none).
     */
    @Test
    void aWrongVerifyHostOrSniHostFailsAsItDoesOnNetty() throws Exception {
        String address = LabHost.a().wireAddress();
        record NameCase(String label, int rdmaPort, int nettyPort, String more, String refusedFor) {
        }
        List<NameCase> cases = List.of(
                new NameCase("wrong-sniHost-named-address", TLS, NETTY_TLS, "&sniHost=other.invalid", null),
                new NameCase("unnamed-address", WRONG_NAME, NETTY_WRONG_NAME, "",
                        "No subject alternative names matching IP address " + address + " found"),
                new NameCase("unnamed-address-verifyHost-false", WRONG_NAME, NETTY_WRONG_NAME, "&verifyHost=false",
                        null),
                new NameCase("unnamed-address-sniHost-named", WRONG_NAME, NETTY_WRONG_NAME,
                        "&sniHost=wrongname.invalid", null),
                new NameCase("sni-acceptor-wrong-sniHost", SNI, NETTY_SNI, "&sniHost=other.invalid",
                        "unrecognized_name"),
                new NameCase("sni-acceptor-its-sniHost", SNI, NETTY_SNI, "&sniHost=" + SNI_NAME, null),
                new NameCase("sni-acceptor-no-sniHost", SNI, NETTY_SNI, "", null));
        // a warm-up first, not compared: a cold JVM's first handshake runs the JDK's elliptic-curve code interpreted
        // under emulation, and Netty's client gives a handshake 10 s
        List<String> args = new java.util.ArrayList<>(List.of("tls.names",
                "warm-up:rdma", tlsUrl(TLS, "client", "trust", ""), "warm-up:netty",
                tlsUrl(TLS, "client", "trust", "").replace("rdma://", "tcp://").replace(":" + TLS + "?",
                        ":" + NETTY_TLS + "?")));
        for (NameCase c : cases) {
            String rdma = tlsUrl(c.rdmaPort(), "client", "trust", c.more());
            args.addAll(List.of("rdma:" + c.label(), rdma, "netty:" + c.label(),
                    rdma.replace("rdma://", "tcp://").replace(":" + c.rdmaPort() + "?", ":" + c.nettyPort() + "?")));
        }
        Map<String, TlsCasesMain.Outcome> outcomes;
        try (JavaProcess p = JavaProcess.driven("tls.names", TlsCasesMain.class).on(LabHost.b()).jvm("-Xmx256m")
                .keepOutput().start(args.toArray(String[]::new))) {
            String done = p.awaitLine(l -> l.equals(TlsCasesMain.DONE), 300_000);
            outcomes = TlsCasesMain.parse(p.keptSince(0));
            assertTrue(done != null, "the client did not finish its cases: " + String.join("\n", p.keptSince(0)));
        }
        System.out.println("warm-up: RDMA " + outcomes.get("warm-up:rdma") + "; Netty "
                + outcomes.get("warm-up:netty"));
        for (NameCase c : cases) {
            TlsCasesMain.Outcome rdma = outcomes.get("rdma:" + c.label());
            TlsCasesMain.Outcome netty = outcomes.get("netty:" + c.label());
            String what = c.label() + ": RDMA " + rdma + "; Netty " + netty;
            assertTrue(rdma != null && netty != null, what);
            System.out.println(c.label() + ": RDMA " + rdma.verdict() + ", Netty " + netty.verdict()
                    + (c.refusedFor() == null ? "" : ", both saying " + c.refusedFor()));
            assertEquals(netty.verdict(), rdma.verdict(), "the same outcome as Netty's: " + what);
            assertEquals(c.refusedFor() == null, rdma.served(), what);
            if (c.refusedFor() != null) {
                assertTrue(rdma.output().contains(c.refusedFor()), "RDMA's client does not say why: " + what);
                assertTrue(netty.output().contains(c.refusedFor()), "Netty's client does not say why: " + what);
            }
        }
    }

    @Test
    void theWireCarriesThePatternInPlainTextOnlyWithoutTls() throws Exception {
        byte[] needle = java.util.Arrays.copyOfRange(TlsProbeMain.pattern(), 0, 64);
        byte[] plain = capture("tls.capture.plain", "rdma://" + LabHost.a().wireAddress() + ":" + PLAIN);
        byte[] tls = capture("tls.capture.tls", tlsUrl(TLS, "client", "trust", ""));
        System.out.printf("capture on host A's %s: %d bytes without TLS, %d bytes with TLS%n", LabHost.WIRE_NIC,
                plain.length, tls.length);
        assertTrue(indexOf(plain, needle) >= 0, "the plain connection's packets (" + plain.length + " bytes captured) "
                + "do not carry the pattern: the capture saw nothing, so it proves nothing");
        assertTrue(tls.length > 2048, "the TLS connection's capture holds " + tls.length + " bytes: it saw no traffic");
        assertEquals(-1, indexOf(tls, needle), "the pattern crossed the wire in clear text over TLS");
    }

    private static void assertRefused(String what, String url, String... anyOf) throws Exception {
        List<String> out = probe("tls.refused", url);
        String first = out.isEmpty() ? "" : out.get(0);
        String all = String.join("\n", out);
        assertTrue(first.startsWith("REFUSED"), what + ": " + all);
        boolean said = false;
        for (String reason : anyOf) {
            said |= all.contains(reason);
        }
        assertTrue(said, what + ": the client's output does not say why (" + String.join(" or ", anyOf) + "): "
                + all);
        System.out.println(what + ": refused, " + all.lines().filter(l -> l.contains("cannot connect")).findFirst()
                .orElse(first));
    }

    /** Runs {@link TlsProbeMain} on host B: its verdict line first, then all of its output. */
    private static List<String> probe(String queue, String url) throws Exception {
        try (JavaProcess p = JavaProcess.driven(queue, TlsProbeMain.class).on(LabHost.b()).jvm("-Xmx256m")
                .keepOutput().start(url, queue)) {
            String verdict = p.awaitLine(l -> l.startsWith("SERVED") || l.startsWith("REFUSED")
                    || l.startsWith("BROKEN"), 120_000);
            assertTrue(p.awaitExitOrKill(30), "the probe did not exit");
            List<String> out = new java.util.ArrayList<>();
            out.add(verdict == null ? "" : verdict);
            out.addAll(p.keptSince(0));
            return out;
        }
    }

    /** The packets host A's NIC saw of RoCE (UDP 4791) while {@link TlsProbeMain} ran once against {@code url}. */
    private static byte[] capture(String queue, String url) throws Exception {
        Path file = Files.createTempFile("tls-capture", ".pcap");
        Process dump = LabHost.a().start(List.of("tcpdump", "-i", LabHost.WIRE_NIC, "-U", "-s", "0", "-w",
                file.toString(), "udp", "port", "4791"), Map.of(), "/");
        try {
            Thread.sleep(1000); // tcpdump opens its socket
            assertFalse(!dump.isAlive(), "tcpdump did not start: " + new String(dump.getErrorStream().readAllBytes()));
            assertEquals("SERVED", probe(queue, url).get(0));
            Thread.sleep(500);
        } finally {
            dump.destroy(); // SIGTERM: tcpdump writes what it holds and exits
            dump.waitFor(10, TimeUnit.SECONDS);
        }
        byte[] bytes = Files.readAllBytes(file);
        Files.delete(file);
        return bytes;
    }

    private static int indexOf(byte[] hay, byte[] needle) {
        outer:
        for (int i = 0; i + needle.length <= hay.length; i++) {
            for (int j = 0; j < needle.length; j++) {
                if (hay[i + j] != needle[j]) {
                    continue outer;
                }
            }
            return i;
        }
        return -1;
    }

}
