package dev.artemisrdma.it.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.Lab;
import dev.artemisrdma.it.distro.RxeCounters;
import dev.artemisrdma.it.iwarp.SiwTraffic;
import dev.artemisrdma.transport.wire.Handshake;
import org.apache.activemq.artemis.utils.VersionLoader;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.Timeout;

/**
 * Brokers and clients of different builds keep talking (issue 26, docs/protocol.md "Compatibility"): on the real rxe
 * fabric (and on soft-iWARP, in the siw lab: see {@link #onSiw}), an older build's connector jar (built from this
 * repository's history by {@code build-old-connectors}, see run-lab-tests: the commit before feature negotiation, which
 * speaks plain v1, and the last release) against this build's, in both roles. Each pairing sends 1 KiB and 1 MiB
 * persistent JMS messages (the 1 MiB ones go as Artemis large-message chunks, fragmented on the wire) and reads them
 * back: every message once, intact; rxe's packet counters prove RDMA carried them; and the meters of this build's side
 * show which wire features it used toward the older peer (none: nothing packed, no header in immediate data) and that
 * it counts that peer as older, while the pairings across Artemis releases below, this build's connector on both ends,
 * show the same meters move.
 *
 * <p>Artemis releases too: the oldest README supports (2.43.0), its JMS client ({@code artemis-jakarta-client-all})
 * with this connector against this build's 2.56.0 broker, and this build's client against a 2.43.0 broker (its
 * modules from {@code artemis-server-osgi}) with this connector: the connector is built against 2.56.0's SPI.
 *
 * <p>On siw (iWARP: no immediate data, 80 inline bytes) this build fits itself to the device and states no
 * immediate-data feature; the older builds predate that fitting and ask for 256 inline bytes, so they are given
 * {@code maxInlineData=80} (as a user of theirs on iWARP would have to); 0.1.0 already sent no immediate data on iWARP.
 * The proof that siw carried an exchange is its TCP connections' byte count on the port.
 *
 * <p>Each side runs in a JVM of its own whose class path carries exactly one connector jar, the old one or this
 * build's, and one Artemis release, so no class of the other build or release can be loaded.
 */
@Timeout(value = 15, unit = TimeUnit.MINUTES)
class CompatibilityLabTest {

    /** The folder run-lab-tests has the older builds put in (one sub-folder per build: jar, revision or FAILED). */
    static final String BUILDS_PROPERTY = OlderBuilds.PROPERTY;
    private static final String[] MESSAGES = {"1024x200", "1048576x4"};
    private static final int MESSAGE_COUNT = 204;
    private static final long MESSAGE_BYTES = 200L * 1024 + 4L * 1048576;

    /** The folder run-lab-tests points at with the oldest supported Artemis's client jar (it-tests/pom.xml). */
    static final String ARTEMIS_PROPERTY = "rdma.compat.artemis";
    /** The oldest Artemis release README supports. */
    static final String OLDEST_ARTEMIS = "2.43.0";

    /** The older builds' inline bytes on siw, whose 80 they do not fit themselves to (they predate issue 36). */
    private static final String OLD_BUILDS_ON_SIW = "maxInlineData=80";

    /** Whether the lab runs soft-iWARP (rdma-lab run --fabric siw) rather than rxe. */
    private static boolean onSiw;
    private static List<OlderBuilds.Build> olderBuilds;
    private static String thisBuildClassPath;
    private static Path oldestArtemisClient;
    /** The oldest supported Artemis's server modules and its Netty (it-tests/pom.xml, compat-artemis-server). */
    private static List<Path> oldestArtemisServer;

    @BeforeAll
    static void findBuilds() throws IOException, InterruptedException {
        onSiw = SiwTraffic.inSiwLab();
        System.out.println("compatibility over " + (onSiw ? "soft-iWARP (siw)" : "rxe"));
        olderBuilds = OlderBuilds.all();
        String dir = System.getProperty(BUILDS_PROPERTY);
        if (olderBuilds.stream().noneMatch(b -> b.name().equals("plain-v1"))) {
            throw new IllegalStateException("no plain-v1 build in " + dir + ": " + olderBuilds);
        }
        thisBuildClassPath = System.getProperty("java.class.path");
        System.out.println("older builds: " + olderBuilds);
        String artemisDir = System.getProperty(ARTEMIS_PROPERTY);
        if (artemisDir == null) {
            throw new IllegalStateException("-D" + ARTEMIS_PROPERTY + " is not set: run-lab-tests sets it to the "
                    + "folder Maven copies Artemis " + OLDEST_ARTEMIS + "'s client into");
        }
        oldestArtemisClient = Path.of(artemisDir, "artemis-jakarta-client-all-" + OLDEST_ARTEMIS + ".jar");
        if (!Files.isRegularFile(oldestArtemisClient)) {
            throw new IllegalStateException(oldestArtemisClient + " is missing: it-tests/pom.xml copies it "
                    + "(execution compat-artemis) from the Maven repository");
        }
        try (Stream<Path> jars = Files.list(Path.of(artemisDir, "server"))) {
            oldestArtemisServer = jars.filter(p -> p.toString().endsWith(".jar")).sorted().toList();
        }
        if (oldestArtemisServer.stream().noneMatch(p -> p.getFileName().toString()
                .equals("artemis-server-" + OLDEST_ARTEMIS + ".jar"))) {
            throw new IllegalStateException("no artemis-server-" + OLDEST_ARTEMIS + ".jar in " + artemisDir
                    + "/server: it-tests/pom.xml unpacks it (execution compat-artemis-server)");
        }
    }

    @TestFactory
    Stream<DynamicTest> olderAndNewerBuildsExchangeJmsMessagesOverRdma() {
        List<DynamicTest> tests = new ArrayList<>();
        tests.add(DynamicTest.dynamicTest("Artemis " + OLDEST_ARTEMIS + " client with this connector -> this broker "
                + "(Artemis " + VersionLoader.getVersion().getFullVersion() + ")", () -> {
            Exchange e = exchange("artemis-" + OLDEST_ARTEMIS, withArtemisClient(oldestArtemisClient),
                    "this", thisBuildClassPath);
            e.assertDelivered();
            assertEquals(OLDEST_ARTEMIS, e.client.get("artemis"), "the client ran on Artemis " + OLDEST_ARTEMIS
                    + "'s classes: " + e.client);
            // this build's wire on both ends, the control of the pairings below: nothing counted older, and the
            // meters move when the features are used, so the zeros below mean something
            assertSameWireBuild(e);
        }));
        tests.add(DynamicTest.dynamicTest("this client (Artemis " + VersionLoader.getVersion().getFullVersion()
                + ") -> Artemis " + OLDEST_ARTEMIS + " broker with this connector", () -> {
            Exchange e = exchange("this", thisBuildClassPath, "artemis-" + OLDEST_ARTEMIS,
                    withArtemisServer(oldestArtemisServer));
            e.assertDelivered();
            assertEquals(OLDEST_ARTEMIS, e.broker.get("artemis"), "the broker ran on Artemis " + OLDEST_ARTEMIS
                    + "'s classes: " + e.broker);
            assertSameWireBuild(e);
        }));
        for (OlderBuilds.Build old : olderBuilds) {
            String oldClassPath = withConnector(old.jar());
            int features = statedFeatures(old);
            tests.add(DynamicTest.dynamicTest(old.name() + " client -> this broker", () -> {
                Exchange e = exchange(old.name(), oldClassPath, "this", thisBuildClassPath);
                e.assertDelivered();
                assertOlderSide(features, "this broker toward the " + old.name() + " client", e.broker);
                assertOwnMeters(old, e.client);
            }));
            tests.add(DynamicTest.dynamicTest("this client -> " + old.name() + " broker", () -> {
                Exchange e = exchange("this", thisBuildClassPath, old.name(), oldClassPath);
                e.assertDelivered();
                assertOlderSide(features, "this client toward the " + old.name() + " broker", e.client);
                assertOwnMeters(old, e.broker);
            }));
        }
        return tests.stream();
    }

    /**
     * Both ends run this build's connector: neither counts the other older; both send headers in immediate data on
     * rxe, and none on siw, which has none.
     */
    private static void assertSameWireBuild(Exchange e) {
        assertEquals("0", e.broker.get("olderPeers"), "broker " + e.broker);
        assertEquals("0", e.client.get("olderPeers"), "client " + e.client);
        long broker = Long.parseLong(e.broker.get("immediateFragments"));
        long client = Long.parseLong(e.client.get("immediateFragments"));
        if (onSiw) {
            assertEquals(0, broker + client, "no immediate data on siw: broker " + e.broker + ", client " + e.client);
        } else {
            assertTrue(broker > 0, "broker " + e.broker);
            assertTrue(client > 0, "client " + e.client);
        }
    }

    /**
     * The wire features {@code old} states. Kept by hand on purpose: a build that adds a feature bit (to
     * {@link Handshake#KNOWN_FEATURES}, every one this build states) must say here which older builds lack it (plain
     * v1 states none; 0.1.0 bits 0-3, not bit 4, whole immediate frames), and the test then checks that this build
     * uses none of what they lack.
     */
    private static int statedFeatures(OlderBuilds.Build old) {
        return switch (old.name()) {
            case "plain-v1" -> 0;
            case "release-0.1.0" -> Handshake.FEATURE_PACKED | Handshake.FEATURE_CREDIT_GROWTH
                    | Handshake.FEATURE_IMMEDIATE_FRAGMENTS | Handshake.FEATURE_CREDIT_RECALL;
            default -> throw new IllegalStateException("CompatibilityLabTest does not know which wire features "
                    + old + " states: add it to statedFeatures");
        };
    }

    /**
     * This build's side toward an older build that states {@code features}: counts it as older when it states fewer
     * than this build, and sent nothing packed where it does not read packed SENDs and no header in immediate data
     * where it reads no immediate fragments (plain v1 reads neither). A whole immediate frame toward a peer without
     * bit 4 would fail its connection on reserved bits, which the exchange's delivery rules out.
     */
    private static void assertOlderSide(int features, String side, Map<String, String> meters) {
        assertTrue(Long.parseLong(meters.get("framesSent")) >= MESSAGE_COUNT, side + ": " + meters);
        boolean fewer = (features & Handshake.KNOWN_FEATURES) != Handshake.KNOWN_FEATURES;
        assertEquals(fewer ? "1" : "0", meters.get("olderPeers"), side + (fewer ? " counts the peer as older: "
                : ": ") + meters);
        if ((features & Handshake.FEATURE_PACKED) == 0) {
            assertEquals("0", meters.get("framesPacked"), side + ": " + meters);
        }
        if ((features & Handshake.FEATURE_IMMEDIATE_FRAGMENTS) == 0) {
            assertEquals("0", meters.get("immediateFragments"), side + ": " + meters);
        }
    }

    /**
     * The old side is really the old build: the plain-v1 commit predates the wire-feature meters, so they are absent
     * on its side; a release that has them counts this build as no older than itself.
     */
    private static void assertOwnMeters(OlderBuilds.Build old, Map<String, String> meters) {
        if (old.name().equals("plain-v1")) {
            assertEquals("absent", meters.get("olderPeers"), old + " has no such meter: " + meters);
        } else {
            assertEquals("0", meters.get("olderPeers"), old + " takes this build for no older: " + meters);
        }
    }

    /** What one client exchanged with one broker, each on its class path, and what the meters said meanwhile. */
    private record Exchange(Map<String, String> client, Map<String, String> broker, Carried carried) {

        void assertDelivered() {
            assertEquals(Integer.toString(MESSAGE_COUNT), client.get("sent"), client.toString());
            assertEquals(client.get("sent"), client.get("received"), "every message came back: " + client);
            assertEquals("0", client.get("repeated"), "none twice: " + client);
            assertEquals("0", client.get("corrupt"), "all intact: " + client);
            assertEquals("0", client.get("extra"), "nothing more: " + client);
            carried.assertCarried();
        }
    }

    /**
     * What the lab's fabric carried during one exchange: rxe's packet counters (a TCP fall-back would leave them
     * still), or, on siw, the bytes its TCP connections on the exchange's port sent (a fall-back would use Artemis's
     * Netty port, not this one).
     */
    private record Carried(RxeCounters rxe, long siwBytes) {

        /** Each message crossed to the broker and back: two packets each on rxe, its bytes twice on siw. */
        void assertCarried() {
            if (rxe != null) {
                assertTrue(rxe.sentPackets() >= 2L * MESSAGE_COUNT && rxe.receivedPackets() >= 2L * MESSAGE_COUNT,
                        "rxe moved by " + rxe);
            } else {
                assertTrue(siwBytes >= 2 * MESSAGE_BYTES, "siw's TCP connections sent " + siwBytes + " bytes for "
                        + MESSAGE_BYTES + " bytes of messages, each sent and received back");
            }
        }

        @Override
        public String toString() {
            return rxe != null ? "rxe " + rxe : "siw sent " + siwBytes + " bytes";
        }
    }

    private static Exchange exchange(String clientName, String clientClassPath, String brokerName,
                                     String brokerClassPath) throws Exception {
        int port = Lab.freshPort();
        Path data = Files.createTempDirectory("compat-" + brokerName);
        String tag = clientName + "-client-" + brokerName + "-broker";
        try (JavaProcess broker = JavaProcess.driven(brokerName + "-broker-" + port, CompatBrokerMain.class)
                .classPath(brokerClassPath).jvm("-Xmx512m", "-XX:TieredStopAtLevel=1", fitted(brokerName))
                .readyWhen(CompatBrokerMain.READY, 180).start(List.of(Lab.addr0(), Integer.toString(port),
                        data.toString()))) {
            RxeCounters before = onSiw ? null : RxeCounters.now();
            long siwBefore = onSiw ? SiwTraffic.siwBytes(port) : 0;
            try (JavaProcess client = JavaProcess.driven(clientName + "-client-" + port, CompatClientMain.class)
                    .classPath(clientClassPath).jvm("-Xmx512m", "-XX:TieredStopAtLevel=1", fitted(clientName))
                    .start(withArgs(Lab.addr0(), Integer.toString(port), "compat." + tag, MESSAGES))) {
                Map<String, String> clientReport = pairs(client.await(CompatClientMain.DONE, 300)
                        .substring(CompatClientMain.DONE.length()));
                Carried moved = onSiw ? new Carried(null, SiwTraffic.siwBytes(port) - siwBefore)
                        : new Carried(RxeCounters.now().since(before), 0);
                broker.send("report"); // while the client is still connected
                Map<String, String> brokerReport = pairs(broker.await(CompatBrokerMain.REPORT, 60)
                        .substring(CompatBrokerMain.REPORT.length()));
                client.send("exit");
                client.awaitExitOrKill(30);
                System.out.println(tag + ": client " + clientReport + "; broker " + brokerReport + "; " + moved);
                broker.send("stop");
                broker.awaitExitOrKill(60);
                return new Exchange(clientReport, brokerReport, moved);
            }
        }
    }

    /**
     * The JVM option that gives a side its transport keys ({@link CompatParams}): on siw, an older build's inline
     * bytes; otherwise none (an empty property).
     */
    private static String fitted(String build) {
        boolean older = !build.equals("this") && !build.startsWith("artemis-");
        return "-D" + CompatParams.PROPERTY + "=" + (onSiw && older ? OLD_BUILDS_ON_SIW : "");
    }

    private static List<String> withArgs(String host, String port, String queue, String... specs) {
        List<String> args = new ArrayList<>(List.of(host, port, queue));
        args.addAll(List.of(specs));
        return args;
    }

    /**
     * This JVM's class path with Artemis's own jars (2.56.0), the JMS API and Netty replaced by {@code clientAll}, an
     * older Artemis's single client jar, which carries them all: this build's connector then runs in that release's
     * client, as in an application that has not upgraded Artemis.
     */
    private static String withArtemisClient(Path clientAll) {
        return withArtemis(List.of(clientAll));
    }

    /** As {@link #withArtemisClient}, for a broker: an older Artemis's server modules and its Netty. */
    private static String withArtemisServer(List<Path> jars) {
        return withArtemis(jars);
    }

    private static String withArtemis(List<Path> jars) {
        List<String> entries = new ArrayList<>();
        int replaced = 0;
        for (String entry : thisBuildClassPath.split(File.pathSeparator)) {
            String file = Path.of(entry).getFileName().toString();
            boolean artemis = file.startsWith("artemis-") && !file.startsWith("artemis-rdma-");
            if (artemis || file.startsWith("jakarta.jms-api") || file.startsWith("netty-")) {
                replaced++;
            } else {
                entries.add(entry);
            }
        }
        if (replaced == 0) {
            throw new IllegalStateException("no Artemis jar on the class path: " + thisBuildClassPath);
        }
        // first: where they carry copies of shared libraries, those are what that release was built with
        entries.addAll(0, jars.stream().map(Path::toString).toList());
        return String.join(File.pathSeparator, entries);
    }

    /** This JVM's class path with both of this build's connector jars (main and tests) replaced by {@code jar}. */
    private static String withConnector(Path jar) {
        return OlderBuilds.withConnector(thisBuildClassPath, jar);
    }

    private static Map<String, String> pairs(String line) {
        Map<String, String> map = new HashMap<>();
        for (String pair : line.trim().split(" ")) {
            int eq = pair.indexOf('=');
            map.put(pair.substring(0, eq), pair.substring(eq + 1));
        }
        return map;
    }
}
