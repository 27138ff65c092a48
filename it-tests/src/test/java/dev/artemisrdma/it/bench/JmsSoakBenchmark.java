package dev.artemisrdma.it.bench;

import dev.artemisrdma.artemis.RdmaClientMetrics;
import dev.artemisrdma.artemis.RdmaConnectionFactories;
import dev.artemisrdma.artemis.RdmaTransportMetricsMXBean;
import dev.artemisrdma.it.RxeHwCounters;
import dev.artemisrdma.it.SoakMix;
import dev.artemisrdma.it.artemis.LabBroker;
import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Queue;
import jakarta.jms.Session;
import org.apache.activemq.artemis.core.config.FileDeploymentManager;
import org.apache.activemq.artemis.core.config.impl.FileConfiguration;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.impl.ActiveMQServerImpl;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.jms.client.ActiveMQMessage;
import org.apache.activemq.artemis.spi.core.security.ActiveMQJAASSecurityManager;

import javax.management.JMX;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The JMS soak over RDMA (outside CI; {@code it-tests/bench/jms-soak} runs it in the lab): one broker from
 * {@code config/broker.xml} whose RDMA acceptor has {@code rnrRetryCount=0}, clients with {@code rnrRetryCount=0}
 * too, and per producer a queue and a consumer. Messages follow {@link SoakMix} (95 % 1 B..2 KiB, the rest
 * log-uniform up to 1 MiB, a few of 16 MiB); those above the client's {@code minLargeMessageSize} travel as Artemis
 * large messages, as any client's would. Every consumer checks order and content of its producer's messages.
 * Afterwards: rxe's RNR counters must not have moved, and our counters (client and acceptor) and rxe's packet
 * counters must account for the bytes. Prints messages/s, MB/s, duration and the counters.
 *
 * <p>System properties: {@code soak.messages} (1,000,000 in all), {@code soak.producers} (2),
 * {@code soak.giants} (16 MiB messages per producer, 3), {@code soak.persistent} (false), {@code soak.seed} (1),
 * {@code soak.url} (client URL options appended to the rdma:// URL, default none).
 */
public final class JmsSoakBenchmark {

    private static final String METRICS = "jms-soak";
    private static final int PORT = 61700;

    private JmsSoakBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        long messages = Long.getLong("soak.messages", 1_000_000);
        int producers = Integer.getInteger("soak.producers", 2);
        int giants = Integer.getInteger("soak.giants", 3);
        boolean persistent = Boolean.getBoolean("soak.persistent");
        long seed = Long.getLong("soak.seed", 1);
        String extra = System.getProperty("soak.url", "");
        String host = System.getenv().getOrDefault("RDMA_LAB_ADDR0", "10.77.0.1");
        if (producers < 1 || messages < producers) {
            throw new IllegalArgumentException("soak.messages (" + messages + ") must be at least soak.producers ("
                    + producers + "), which must be at least 1");
        }
        List<SoakMix> mixes = new ArrayList<>();
        long payload = 0;
        for (int p = 0; p < producers; p++) {
            long count = messages / producers + (p < messages % producers ? 1 : 0);
            SoakMix mix = new SoakMix(seed * 1000 + p, count, Math.min(giants, (int) count - 1));
            mixes.add(mix);
            payload += mix.totalBytes();
        }
        String url = "rdma://" + host + ":" + PORT + "?rnrRetryCount=0&metricsName=" + METRICS
                + (extra.isEmpty() ? "" : "&" + extra);
        Path data = Files.createTempDirectory("jms-soak");
        ActiveMQServer broker = startBroker(host, data, persistent);
        try (ActiveMQConnectionFactory cf = RdmaConnectionFactories.create(url)) {
            int threshold = cf.getMinLargeMessageSize();
            long expectedLarge = 0;
            for (SoakMix mix : mixes) {
                for (long seq = 0; seq < mix.count(); seq++) {
                    expectedLarge += mix.size(seq) > threshold ? 1 : 0;
                }
            }
            System.out.printf(Locale.ROOT, "jms soak: %,d messages (%,d payload bytes, %,d above the large-message "
                            + "threshold of %,d bytes, %d of 16 MiB per producer), %d producers/queues/consumers, "
                            + "%s, rnrRetryCount=0 on acceptor and client (%s)%n", messages, payload, expectedLarge,
                    threshold, giants, producers, persistent ? "persistent" : "non-persistent", url);

            RdmaTransportMetricsMXBean acceptor = acceptorMetrics();
            long acceptorSentBefore = acceptor.getBytesSent();
            long acceptorReceivedBefore = acceptor.getBytesReceived();
            RxeHwCounters before = RxeHwCounters.now();
            AtomicLong received = new AtomicLong();
            AtomicLong receivedBytes = new AtomicLong();
            AtomicLong receivedLarge = new AtomicLong();
            List<Connection> connections = new ArrayList<>();
            List<CompletableFuture<Void>> work = new ArrayList<>();
            long start = System.nanoTime();
            for (int i = 0; i < producers; i++) {
                int p = i;
                Connection consumerConnection = cf.createConnection();
                Connection producerConnection = cf.createConnection();
                connections.add(consumerConnection);
                connections.add(producerConnection);
                SoakMix mix = mixes.get(p);
                String queue = "soak." + p;
                Session cs = consumerConnection.createSession(false, Session.AUTO_ACKNOWLEDGE);
                MessageConsumer consumer = cs.createConsumer(cs.createQueue(queue));
                consumerConnection.start();
                work.add(run("soak-consumer-" + p, () -> consume(consumer, mix, p, received, receivedBytes,
                        receivedLarge)));
                work.add(run("soak-producer-" + p, () -> produce(producerConnection, queue, mix, p, persistent)));
            }
            CompletableFuture<Void> all = CompletableFuture.allOf(work.toArray(new CompletableFuture[0]));
            long lastReport = System.nanoTime();
            while (!all.isDone()) {
                try {
                    all.get(1, TimeUnit.SECONDS);
                } catch (java.util.concurrent.TimeoutException e) {
                    if (System.nanoTime() - lastReport > TimeUnit.SECONDS.toNanos(60)) {
                        lastReport = System.nanoTime();
                        double s = (lastReport - start) / 1e9;
                        System.out.printf(Locale.ROOT, "jms soak: %.0f s, %,d of %,d messages received (%,.0f/s)%n",
                                s, received.get(), messages, received.get() / s);
                    }
                } catch (java.util.concurrent.ExecutionException e) {
                    for (CompletableFuture<Void> w : work) {
                        if (w.isCompletedExceptionally()) {
                            w.join();
                        }
                    }
                    throw e;
                }
            }
            long end = System.nanoTime();
            for (Connection c : connections) {
                c.close();
            }
            RxeHwCounters moved = RxeHwCounters.now().since(before);
            RdmaTransportMetricsMXBean client = RdmaClientMetrics.counters(METRICS);
            long acceptorSent = acceptor.getBytesSent() - acceptorSentBefore;
            long acceptorReceived = acceptor.getBytesReceived() - acceptorReceivedBefore;
            double seconds = (end - start) / 1e9;

            System.out.printf(Locale.ROOT, "jms soak: %,d messages, %,d bytes in %.1f s: %,.0f messages/s, "
                            + "%.1f MB/s (payload, producer to consumer); %,d received as large messages%n",
                    received.get(), receivedBytes.get(), seconds, received.get() / seconds,
                    receivedBytes.get() / seconds / 1e6, receivedLarge.get());
            System.out.printf(Locale.ROOT, "jms soak: acceptor received %,d bytes and sent %,d; clients sent %,d "
                            + "and received %,d; RNR retry errors: acceptor %d, clients %d%n", acceptorReceived,
                    acceptorSent, client.getBytesSent(), client.getBytesReceived(), acceptor.getRnrRetryErrors(),
                    client.getRnrRetryErrors());
            System.out.println("jms soak: rxe hw counters moved: " + moved.nonZero());
            Map<String, Long> rnr = moved.rnr();
            System.out.println("jms soak: RNR counters moved: " + rnr);

            List<String> problems = new ArrayList<>();
            check(problems, received.get() == messages, "received " + received.get() + " of " + messages);
            check(problems, receivedBytes.get() == payload, "received " + receivedBytes.get() + " payload bytes of "
                    + payload);
            rnr.forEach((name, v) -> check(problems, v == 0, "rxe hw counter " + name + " moved by " + v));
            check(problems, acceptor.getRnrRetryErrors() == 0 && client.getRnrRetryErrors() == 0,
                    "RNR retry errors on our connections");
            // every payload byte entered the broker through the RDMA acceptor and left it through it again
            check(problems, acceptorReceived >= payload && acceptorSent >= payload, "the acceptor moved "
                    + acceptorReceived + " bytes in and " + acceptorSent + " out for " + payload + " payload bytes");
            // the two ends of every connection counted the same bytes: no connection of the factory went uncounted
            check(problems, client.getBytesSent() == acceptorReceived && client.getBytesReceived() == acceptorSent,
                    "the clients' counters (" + client.getBytesSent() + " sent, " + client.getBytesReceived()
                            + " received) differ from the acceptor's");
            check(problems, moved.get("sent_pkts") >= 2 * payload / 4096, "rxe sent " + moved.get("sent_pkts")
                    + " packets for twice " + payload + " payload bytes");
            check(problems, expectedLarge == 0 || receivedLarge.get() > 0, "no message arrived as a large message");
            if (!problems.isEmpty()) {
                System.out.println("jms soak: FAILED: " + problems);
                System.exit(1);
            }
            System.out.println("jms soak: PASSED (order and content of every message checked, RNR 0)");
        } finally {
            broker.stop();
        }
        System.exit(0);
    }

    private static void check(List<String> problems, boolean ok, String problem) {
        if (!ok) {
            problems.add(problem);
        }
    }

    private interface Work {
        void run() throws Exception;
    }

    private static CompletableFuture<Void> run(String name, Work work) {
        CompletableFuture<Void> done = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                work.run();
                done.complete(null);
            } catch (Throwable e) {
                done.completeExceptionally(new IllegalStateException(name + ": " + e, e));
            }
        }, name);
        t.setDaemon(true);
        t.start();
        return done;
    }

    private static void produce(Connection connection, String queueName, SoakMix mix, int producer,
                                boolean persistent) throws Exception {
        Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = session.createQueue(queueName);
        MessageProducer out = session.createProducer(queue);
        out.setDeliveryMode(persistent ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT);
        byte[] scratch = new byte[SoakMix.GIANT];
        ByteBuffer body = ByteBuffer.wrap(scratch);
        for (long seq = 0; seq < mix.count(); seq++) {
            body.clear();
            mix.fill(body, seq);
            BytesMessage m = session.createBytesMessage();
            m.writeBytes(scratch, 0, body.position());
            m.setIntProperty("producer", producer);
            m.setLongProperty("seq", seq);
            out.send(m);
        }
    }

    private static void consume(MessageConsumer consumer, SoakMix mix, int producer, AtomicLong received,
                                AtomicLong receivedBytes, AtomicLong receivedLarge) throws Exception {
        byte[] scratch = new byte[SoakMix.GIANT];
        for (long seq = 0; seq < mix.count(); seq++) {
            Message m = consumer.receive(120_000);
            if (m == null) {
                throw new IllegalStateException("producer " + producer + ": message " + seq + " of " + mix.count()
                        + " did not arrive within 120 s");
            }
            if (m.getIntProperty("producer") != producer || m.getLongProperty("seq") != seq) {
                throw new IllegalStateException("producer " + producer + ": expected message " + seq + ", got "
                        + m.getIntProperty("producer") + "/" + m.getLongProperty("seq"));
            }
            BytesMessage bytes = (BytesMessage) m;
            long length = bytes.getBodyLength();
            if (length > scratch.length) {
                throw new IllegalStateException("producer " + producer + ": message " + seq + " has " + length
                        + " bytes, more than any message sent");
            }
            int read = length == 0 ? 0 : bytes.readBytes(scratch, (int) length);
            String problem = mix.check(ByteBuffer.wrap(scratch, 0, Math.max(read, 0)), seq);
            if (problem != null) {
                throw new IllegalStateException("producer " + producer + ": " + problem);
            }
            if (((ActiveMQMessage) m).getCoreMessage().isLargeMessage()) {
                receivedLarge.incrementAndGet();
            }
            receivedBytes.addAndGet(length);
            received.incrementAndGet();
        }
    }

    /** config/broker.xml as a user installs it, with rnrRetryCount=0 added to its RDMA acceptor's URL. */
    private static ActiveMQServer startBroker(String host, Path data, boolean persistent) throws Exception {
        System.setProperty("rdma.host", host);
        System.setProperty("rdma.port", Integer.toString(PORT));
        FileConfiguration config = new FileConfiguration();
        FileDeploymentManager deployment = new FileDeploymentManager(LabBroker.configDir().resolve("broker.xml")
                .toUri().toString());
        deployment.addDeployable(config);
        deployment.readConfiguration();
        LabBroker.writable(config, data, persistent).setJMXManagementEnabled(true);
        Set<String> names = new HashSet<>();
        config.getAcceptorConfigurations().forEach(a -> names.add(a.getName()));
        if (!names.equals(Set.of("rdma"))) {
            throw new IllegalStateException("config/broker.xml should have the one acceptor 'rdma', has " + names);
        }
        config.setAcceptorConfigurations(new HashSet<>());
        config.addAcceptorConfiguration("rdma", "tcp://" + host + ":" + PORT + "?protocols=CORE;rnrRetryCount=0");
        ActiveMQServer server = new ActiveMQServerImpl(config, new ActiveMQJAASSecurityManager());
        server.start();
        if (!server.isActive()) {
            throw new IllegalStateException("broker did not become active");
        }
        return server;
    }

    /** The RDMA acceptor's counters, from the MXBean it registers beside the broker's acceptor MBean. */
    private static RdmaTransportMetricsMXBean acceptorMetrics() throws Exception {
        MBeanServer mbeans = ManagementFactory.getPlatformMBeanServer();
        Set<ObjectName> found = mbeans.queryNames(new ObjectName(
                "org.apache.activemq.artemis:component=acceptors,subcomponent=rdma-transport,*"), null);
        if (found.size() != 1) {
            throw new IllegalStateException("expected one RDMA acceptor MXBean, found " + found);
        }
        return JMX.newMXBeanProxy(mbeans, found.iterator().next(), RdmaTransportMetricsMXBean.class);
    }
}
