package dev.artemisrdma.it;

import dev.artemisrdma.artemis.JmsScenarios;
import dev.artemisrdma.artemis.RdmaInitialContextFactory;
import dev.artemisrdma.it.artemis.LabBroker;
import dev.artemisrdma.transport.RawPeer;
import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.Addressing;
import dev.artemisrdma.transport.fabric.AddressingException;
import dev.artemisrdma.transport.fabric.ConnectOptions;
import dev.artemisrdma.transport.fabric.ConnectionRequestHandler;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.Fabric;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.FabricListener;
import dev.artemisrdma.transport.fabric.ForwardingConnectionRequest;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.stats.TransportStats;
import dev.artemisrdma.transport.verbs.VerbsFabric;
import jakarta.jms.Connection;
import jakarta.jms.ConnectionFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import javax.naming.Context;
import javax.naming.InitialContext;
import java.io.IOException;
import java.net.Inet6Address;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Hashtable;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Fabric addressing on the real rxe devices: IPv6 endpoints (transport and JMS), device=, tos= (read back from the
 * queue pairs with ibv_query_qp), wildcard binds, and the errors for unknown devices and unroutable
 * addresses. What the kernel chose (devices, traffic classes) is also written to addressing.txt in the results dir.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class AddressingLabTest {

    private static final Pattern CM_ID_LINK = Pattern.compile("link (\\S+)/\\d+");
    private static VerbsFabric fabric;

    @BeforeAll
    static void openFabric() throws Exception {
        fabric = new VerbsFabric();
        assertEquals(List.of("rxe0", "rxe1"), fabric.deviceNames().stream().sorted().toList());
    }

    @AfterAll
    static void closeFabric() {
        if (fabric != null) {
            fabric.close();
        }
    }

    /** Counts frames and bytes; keeps the channel it saw. */
    private static final class Counter implements ChannelHandler {
        final AtomicInteger frames = new AtomicInteger();
        final AtomicInteger bytes = new AtomicInteger();

        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            bytes.addAndGet(frame.remaining());
            frames.incrementAndGet();
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
        }

        void await(int count) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (frames.get() < count && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertEquals(count, frames.get(), "frames received");
        }
    }

    /** A server transport and the channels it accepted. */
    private static final class Server implements AutoCloseable {
        final RdmaTransport transport;
        final RdmaServer server;
        final Counter counter = new Counter();
        final List<RdmaChannel> accepted = new ArrayList<>();

        Server(TransportConfig config, InetSocketAddress bind) throws FabricException {
            transport = RdmaTransport.create(fabric, config);
            server = transport.listen(bind, channel -> {
                synchronized (accepted) {
                    accepted.add(channel);
                }
                return counter;
            });
        }

        int port() {
            return server.localAddress().getPort();
        }

        @Override
        public void close() {
            transport.close();
        }
    }

    /** Connects from a fresh client transport, sends {@code frames} frames and checks the counters on both ends. */
    private static RdmaChannel roundTrip(RdmaTransport client, Server server, InetSocketAddress target, int frames)
            throws Exception {
        int before = server.counter.frames.get();
        RdmaChannel channel = client.connect(target, new Counter());
        long bytes = 0;
        for (int i = 0; i < frames; i++) {
            byte[] data = new byte[1 + (i * 997) % 40_000];
            channel.write(ByteBuffer.wrap(data), true);
            bytes += data.length;
        }
        server.counter.await(before + frames);
        TransportStats stats = channel.stats();
        assertEquals(frames, stats.framesSent(), "our counter of frames sent to " + RdmaTransport.describe(target));
        assertEquals(bytes, stats.bytesSent(), "our counter of bytes sent");
        // every frame left in a SEND: one of its own (or several, fragmented) or a packed one with others that queued
        // behind a credit wait (the first 4 frames to a shared pool can)
        assertTrue(stats.sendsPosted() - stats.packedSends() + stats.framesPacked() >= frames,
                "SEND work requests posted: " + stats);
        return channel;
    }

    @Test
    void ipv6TransportEndpointsCarryFramesAndTheKernelShowsIpv6CmIds() throws Exception {
        InetSocketAddress bind = new InetSocketAddress(Lab.addr6_1(), Lab.freshPort());
        try (Server server = new Server(TransportConfig.defaults(), bind);
             RdmaTransport client = RdmaTransport.create(fabric, TransportConfig.defaults())) {
            long packets = rxePackets();
            RdmaChannel channel = roundTrip(client, server, bind, 300);
            assertTrue(channel.remoteAddress().getAddress() instanceof Inet6Address, "" + channel.remoteAddress());
            RdmaChannel accepted = server.accepted.get(0);
            assertTrue(accepted.stats().framesReceived() == 300, "" + accepted.stats());
            assertTrue(rxePackets() - packets >= 300, "rxe sent_pkts grew by " + (rxePackets() - packets));
            List<String> ids = cmIds(bind.getPort());
            note("IPv6 cm_ids on port " + bind.getPort() + ": " + ids);
            assertTrue(ids.stream().anyMatch(l -> l.contains("fd77::2") && l.contains("CONNECT")),
                    "the kernel lists a connected cm_id on fd77::2: " + ids);
            channel.close();
        }
    }

    @Test
    void jmsClientsReachAnIpv6BrokerThroughRdmaUrlsAndJndi() throws Exception {
        int port = Lab.freshPort();
        String url = "rdma://[" + Lab.addr6_0() + "]:" + port;
        try (LabBroker broker = LabBroker.start("[" + Lab.addr6_0() + "]", port,
                Files.createTempDirectory("ipv6-broker"), false, 0)) {
            Hashtable<String, Object> env = new Hashtable<>();
            env.put(Context.INITIAL_CONTEXT_FACTORY, RdmaInitialContextFactory.class.getName());
            env.put("connectionFactory.ConnectionFactory", url + "?reconnectAttempts=0");
            InitialContext context = new InitialContext(env);
            ConnectionFactory cf = (ConnectionFactory) context.lookup("ConnectionFactory");
            long packets = rxePackets();
            JmsScenarios.queueRoundTrip(cf, "ipv6.queue", 300);
            long sent = rxePackets() - packets;
            note("JMS over " + url + ": 300 messages, rxe sent_pkts +" + sent);
            assertTrue(sent >= 600, "300 messages and their acknowledgements went through rxe: sent_pkts +" + sent);
            try (Connection connection = cf.createConnection()) {
                connection.start();
                List<String> ids = cmIds(port);
                note("JMS cm_ids on port " + port + ": " + ids);
                assertTrue(ids.stream().filter(l -> l.contains(Lab.addr6_0()) && l.contains("CONNECT")).count() >= 2,
                        "both ends of the JMS connection are IPv6 cm_ids: " + ids);
            }
            context.close();
        }
    }

    @Test
    void aListenerOnANamedDeviceNeedsOneOfItsAddresses() throws Exception {
        try (FabricListener ok = fabric.listen(new InetSocketAddress(Lab.addr0(), Lab.freshPort()),
                new Addressing("rxe0", Addressing.DEFAULT_TOS), request -> request.reject(new byte[0]))) {
            assertEquals(Lab.addr0(), ok.localAddress().getAddress().getHostAddress());
        }
        AddressingException e = assertThrows(AddressingException.class, () -> fabric.listen(
                new InetSocketAddress(Lab.addr1(), Lab.freshPort()), new Addressing("rxe0", Addressing.DEFAULT_TOS),
                request -> request.reject(new byte[0])));
        note("listen on rxe1's address with device=rxe0: " + e.getMessage());
        assertTrue(e.getMessage().contains(Lab.addr1() + " is an address of rxe1, not of rxe0"), e.getMessage());
        e = assertThrows(AddressingException.class, () -> fabric.listen(
                new InetSocketAddress(Lab.addr6_0(), Lab.freshPort()), new Addressing("rxe9", Addressing.DEFAULT_TOS),
                request -> request.reject(new byte[0])));
        assertTrue(e.getMessage().contains("no RDMA device named 'rxe9'; devices present: [rxe0, rxe1]"),
                e.getMessage());
    }

    @Test
    void aConnectorOnANamedDeviceUsesItOrSaysWhereTheRouteLeads() throws Exception {
        InetSocketAddress bind = new InetSocketAddress(Lab.addr1(), Lab.freshPort());
        try (Server server = new Server(TransportConfig.defaults(), bind)) {
            List<String> worked = new ArrayList<>();
            for (String device : List.of("rxe0", "rxe1")) {
                try (RdmaTransport client = RdmaTransport.create(fabric,
                        TransportConfig.builder().device(device).build())) {
                    roundTrip(client, server, bind, 20).close();
                    worked.add(device);
                } catch (AddressingException e) {
                    note("connect to " + bind + " with device=" + device + ": " + e.getMessage());
                    assertTrue(e.getMessage().contains("with device=" + device + ": the route to it leaves through "
                            + (device.equals("rxe0") ? "rxe1" : "rxe0") + ", not " + device), e.getMessage());
                }
            }
            note("connect to " + bind + " works with device=" + worked);
            assertEquals(List.of("rxe1"), worked, "only the route's device (rxe1 owns " + Lab.addr1() + ") works");
            try (RdmaTransport client = RdmaTransport.create(fabric, TransportConfig.builder().device("mlx5_0")
                    .build())) {
                AddressingException e = assertThrows(AddressingException.class,
                        () -> client.connect(bind, new Counter()));
                assertTrue(e.getMessage().contains("no RDMA device named 'mlx5_0'; devices present: [rxe0, rxe1]"),
                        e.getMessage());
            }
        }
    }

    @Test
    void typeOfServiceOfTheConnectingSideReachesBothQueuePairs() throws Exception {
        int port = Lab.freshPort();
        RawPeer server = new RawPeer(4, 1, 0);
        RawPeer client = new RawPeer(4, 1, 0);
        CompletableFuture<QueuePair> accepted = new CompletableFuture<>();
        try (FabricListener listener = fabric.listen(new InetSocketAddress(Lab.addr1(), port),
                new Addressing(null, 64), request -> {
                    try {
                        accepted.complete(request.accept(server, new byte[0], 7, server));
                    } catch (FabricException e) {
                        accepted.completeExceptionally(e);
                    }
                })) {
            QueuePair active = fabric.connect(listener.localAddress(), client, new ConnectOptions(new byte[0], 7, 7,
                    Duration.ofSeconds(20), new Addressing(null, 104)), client);
            QueuePair passive = accepted.get(20, TimeUnit.SECONDS);
            assertTrue(server.established.await(20, TimeUnit.SECONDS), "passive side established");
            int activeClass = fabric.trafficClass(active);
            int passiveClass = fabric.trafficClass(passive);
            note("tos: active asked 104 -> QP traffic class " + activeClass + "; listener asked 64 -> passive QP "
                    + passiveClass);
            assertEquals(104, activeClass, "the active queue pair's address vector carries tos=104");
            // rdma_cm builds the passive side's path from the request: the connecting side's class wins
            assertEquals(104, passiveClass, "the passive queue pair answers in the class of the request");
            client.close();
            server.disconnected.await(10, TimeUnit.SECONDS);
            server.close();
        }
    }

    @Test
    void transportTosKeyReachesTheQueuePairsOfBothEnds() throws Exception {
        InetSocketAddress bind = new InetSocketAddress(Lab.addr0(), Lab.freshPort());
        Recording recording = new Recording();
        try (RdmaTransport serverTransport = RdmaTransport.create(recording, TransportConfig.defaults());
             RdmaTransport client = RdmaTransport.create(recording, TransportConfig.builder().tos(96).build());
             RdmaTransport plain = RdmaTransport.create(recording, TransportConfig.defaults())) {
            Counter atServer = new Counter();
            serverTransport.listen(bind, channel -> atServer);
            RdmaChannel channel = connectAndSend(client, bind, atServer, 1);
            assertEquals(List.of(96, 96), recording.trafficClasses(), "client (tos=96) and server queue pairs");
            recording.queuePairs.clear();
            RdmaChannel other = connectAndSend(plain, bind, atServer, 2);
            assertEquals(List.of(0, 0), recording.trafficClasses(), "without tos the kernel's default, 0");
            channel.close();
            other.close();
        }
    }

    /**
     * {@code ackTimeout} reaches the device on both ends (issue 35): the client's queue pair runs with the client's
     * value, the accepted one with the acceptor's (rdma_cm sets it on the request's own id before rdma_accept), each
     * with its retry count; without the keys, the defaults 17 and 6. Read back with ibv_query_qp.
     */
    @Test
    void transportAckTimeoutKeyReachesTheQueuePairsOfBothEnds() throws Exception {
        InetSocketAddress bind = new InetSocketAddress(Lab.addr0(), Lab.freshPort());
        Recording recording = new Recording();
        try (RdmaTransport serverTransport = RdmaTransport.create(recording,
                TransportConfig.builder().ackTimeout(15).build());
             RdmaTransport client = RdmaTransport.create(recording, TransportConfig.builder().ackTimeout(14)
                     .retryCount(5).build());
             RdmaTransport plain = RdmaTransport.create(recording, TransportConfig.defaults())) {
            Counter atServer = new Counter();
            serverTransport.listen(bind, channel -> atServer);
            RdmaChannel channel = connectAndSend(client, bind, atServer, 1);
            List<String> tuned = recording.retryParameters();
            note("ackTimeout 14 / retryCount 5 (client), 15 (acceptor): queue pairs run with " + tuned);
            // the accepted queue pair retries as often as the client's request says: the kernel's CM takes it from there
            assertEquals(List.of("timeout 14 retry 5", "timeout 15 retry 5"), tuned, "client, then accepted queue pair");
            recording.queuePairs.clear();
            RdmaChannel other = connectAndSend(plain, bind, atServer, 2);
            assertEquals(List.of("timeout 17 retry 6", "timeout 15 retry 6"), recording.retryParameters(),
                    "a default client (ackTimeout 17, retryCount 6) against the acceptor's 15");
            channel.close();
            other.close();
        }
    }

    /**
     * Connects {@code from} to {@code bind} and sends one frame, so that both ends' queue pairs are connected; returns
     * once the server has received {@code frames} in all.
     */
    private static RdmaChannel connectAndSend(RdmaTransport from, InetSocketAddress bind, Counter atServer, int frames)
            throws Exception {
        RdmaChannel channel = from.connect(bind, new Counter());
        channel.write(ByteBuffer.wrap(new byte[100]), true);
        atServer.await(frames);
        return channel;
    }

    /** The lab's fabric, recording every queue pair it creates (connect and accept) to read their traffic class. */
    private static final class Recording implements Fabric {
        final List<QueuePair> queuePairs = new java.util.concurrent.CopyOnWriteArrayList<>();

        /** Each queue pair's "timeout T retry R", in the order they were created. */
        List<String> retryParameters() throws FabricException {
            List<String> values = new ArrayList<>();
            for (QueuePair qp : queuePairs) {
                int[] p = fabric.retryParameters(qp);
                values.add("timeout " + p[0] + " retry " + p[1]);
            }
            return values;
        }

        List<Integer> trafficClasses() throws FabricException {
            List<Integer> classes = new ArrayList<>();
            for (QueuePair qp : queuePairs) {
                classes.add(fabric.trafficClass(qp));
            }
            return classes;
        }

        @Override
        public FabricListener listen(InetSocketAddress bindAddress, Addressing addressing,
                                     ConnectionRequestHandler handler) throws FabricException {
            return fabric.listen(bindAddress, addressing, request -> handler.onConnectionRequest(
                    new ForwardingConnectionRequest(request) {
                        @Override
                        public QueuePair accept(ConnectionSetup setup, byte[] replyData, int rnrRetryCount,
                                                QueuePairEvents events) throws FabricException {
                            QueuePair qp = super.accept(setup, replyData, rnrRetryCount, events);
                            queuePairs.add(qp);
                            return qp;
                        }
                    }));
        }

        @Override
        public QueuePair connect(InetSocketAddress remote, ConnectionSetup setup, ConnectOptions options,
                                 QueuePairEvents events) throws FabricException {
            QueuePair qp = fabric.connect(remote, setup, options, events);
            queuePairs.add(0, qp); // the active side first
            return qp;
        }

        @Override
        public void close() {
            // the shared fabric is closed after all tests
        }
    }

    @Test
    void wildcardListenersAcceptOnEveryDevicesAddresses() throws Exception {
        int port = Lab.freshPort();
        try (Server server = new Server(TransportConfig.defaults(), new InetSocketAddress("0.0.0.0", port));
             RdmaTransport client = RdmaTransport.create(fabric, TransportConfig.defaults())) {
            List<RdmaChannel> channels = new ArrayList<>();
            for (String host : List.of(Lab.addr0(), Lab.addr1())) {
                channels.add(roundTrip(client, server, new InetSocketAddress(host, port), 5));
            }
            Set<String> passiveLinks = new TreeSet<>();
            Set<String> localAddresses = new TreeSet<>();
            synchronized (server.accepted) {
                server.accepted.forEach(ch -> localAddresses.add(ch.localAddress().getAddress().getHostAddress()));
            }
            for (String line : cmIds(port)) {
                if (line.contains("src-addr") && line.contains(":" + port + " ") && line.contains("CONNECT")) {
                    Matcher m = CM_ID_LINK.matcher(line);
                    if (m.find()) {
                        passiveLinks.add(m.group(1));
                    }
                }
            }
            note("0.0.0.0:" + port + " accepted on local addresses " + localAddresses + ", devices " + passiveLinks
                    + "; cm_ids " + cmIds(port));
            assertEquals(new TreeSet<>(List.of(Lab.addr0(), Lab.addr1())), localAddresses);
            assertEquals(new TreeSet<>(List.of("rxe0", "rxe1")), passiveLinks, "accepted on both devices");
            channels.forEach(RdmaChannel::close);
        }
        int port6 = Lab.freshPort();
        try (Server server = new Server(TransportConfig.defaults(), new InetSocketAddress("::", port6));
             RdmaTransport client = RdmaTransport.create(fabric, TransportConfig.defaults())) {
            for (String host : List.of(Lab.addr6_0(), Lab.addr6_1())) {
                roundTrip(client, server, new InetSocketAddress(host, port6), 5).close();
            }
            assertEquals(2, server.accepted.size());
        }
    }

    @Test
    void aWildcardListenerWithADeviceServesThatDeviceOnly() throws Exception {
        for (String device : List.of("rxe0", "rxe1")) {
            int port = Lab.freshPort();
            try (Server server = new Server(TransportConfig.builder().device(device).build(),
                    new InetSocketAddress("0.0.0.0", port));
                 RdmaTransport client = RdmaTransport.create(fabric, TransportConfig.defaults())) {
                // in the lab a connection arrives on the device whose address it was sent to
                String own = device.equals("rxe0") ? Lab.addr0() : Lab.addr1();
                String other = device.equals("rxe0") ? Lab.addr1() : Lab.addr0();
                roundTrip(client, server, new InetSocketAddress(own, port), 3).close();
                FabricException e = assertThrows(FabricException.class,
                        () -> client.connect(new InetSocketAddress(other, port), new Counter()));
                note("0.0.0.0 device=" + device + ": " + other + " refused: " + e.getMessage());
                assertTrue(e.getMessage().contains("accepts connections on RDMA device " + device + " only, this one "
                        + "arrived on " + (device.equals("rxe0") ? "rxe1" : "rxe0")), e.getMessage());
                assertEquals(1, server.accepted.size());
            }
        }
    }

    @Test
    void unroutableAddressesSayWhatToCheck() throws Exception {
        try (RdmaTransport client = RdmaTransport.create(fabric, TransportConfig.defaults())) {
            for (String host : List.of("10.99.0.1", "fd99::1")) {
                AddressingException e = assertThrows(AddressingException.class,
                        () -> client.connect(new InetSocketAddress(host, 61700), new Counter()));
                note("connect to " + host + ": " + e.getMessage());
                assertTrue(e.getMessage().contains("no RDMA device has a route to ") && e.getMessage().contains(
                        "check 'rdma link'") && e.getMessage().contains("'ip route get "), e.getMessage());
            }
            AddressingException e = assertThrows(AddressingException.class, () -> client.listen(
                    new InetSocketAddress("10.99.0.1", Lab.freshPort()), ch -> new Counter()));
            note("listen on 10.99.0.1: " + e.getMessage());
            assertTrue(e.getMessage().contains("no RDMA device has the address 10.99.0.1"), e.getMessage());
            assertEquals(0, client.channelCount());
        }
    }

    // ------------------------------------------------------------------------------------------------ helpers

    /** The kernel's cm_id lines ({@code rdma resource show cm_id}) that mention {@code port}. */
    private static List<String> cmIds(int port) throws IOException, InterruptedException {
        Process p = new ProcessBuilder("rdma", "resource", "show", "cm_id").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0, "rdma resource show cm_id: " + out);
        List<String> lines = new ArrayList<>();
        for (String line : out.split("\n")) {
            if (line.contains(":" + port + " ") || line.endsWith(":" + port)) {
                lines.add(line.trim());
            }
        }
        return lines;
    }

    /** Packets both rxe devices have sent (their hw_counters). */
    private static long rxePackets() throws IOException {
        long sum = 0;
        for (String device : List.of("rxe0", "rxe1")) {
            sum += Long.parseLong(Files.readString(Path.of("/sys/class/infiniband", device, "ports/1/hw_counters",
                    "sent_pkts")).trim());
        }
        return sum;
    }

    private static synchronized void note(String line) {
        String dir = System.getenv("RDMA_LAB_RESULTS");
        if (dir == null) {
            return;
        }
        try {
            Files.writeString(Path.of(dir, "addressing.txt"), line + "\n", StandardCharsets.UTF_8,
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }
}
