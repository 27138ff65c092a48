package dev.artemisrdma.it.artemis;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.lang.management.MemoryUsage;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;

import javax.management.MBeanServer;
import javax.management.NotificationEmitter;
import javax.management.ObjectName;
import javax.management.openmbean.CompositeData;

import com.sun.management.GarbageCollectionNotificationInfo;
import org.apache.activemq.artemis.core.config.FileDeploymentManager;
import org.apache.activemq.artemis.core.config.impl.FileConfiguration;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.impl.ActiveMQServerImpl;
import org.apache.activemq.artemis.spi.core.security.ActiveMQJAASSecurityManager;

/**
 * The broker the hostile peers attack, in a process of its own (run with {@code -Xmx1g}): {@code config/broker.xml}
 * with its RDMA acceptor's URL given the small bounds under test, JMX management on (the acceptor's transport MBean is
 * read in-process). Prints {@value #READY} once serving, then answers one command per line on stdin:
 * <ul>
 *   <li>{@code stats}: one line {@code STATS key=value ...}: the used heap, the highest heap used after any GC since
 *       the last reset, and the acceptor's transport counters;</li>
 *   <li>{@code heap}: the same after a full GC ({@code heapAfterGc} is then the heap the broker really holds);</li>
 *   <li>{@code reset}: starts a new peak.</li>
 * </ul>
 * Args: host port dataDir acceptorQuery (the bounds, as URL query keys).
 */
public final class HostileBrokerMain {

    public static final String READY = "HOSTILE BROKER READY";
    static final String ACCEPTOR = "rdma";
    private static final AtomicLong PEAK_AFTER_GC = new AtomicLong();

    private HostileBrokerMain() {
    }

    public static void main(String[] args) throws Exception {
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        ActiveMQServer server = start(host, port, Path.of(args[2]), args[3]);
        watchGarbageCollections();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                server.stop();
            } catch (Exception ignored) {
                // exiting
            }
        }));
        System.out.println(READY);
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String command;
        while ((command = in.readLine()) != null) {
            switch (command.trim()) {
                case "stats" -> System.out.println("STATS " + stats(server, false));
                case "heap" -> System.out.println("STATS " + stats(server, true));
                case "reset" -> {
                    PEAK_AFTER_GC.set(0);
                    System.out.println("RESET");
                }
                default -> System.out.println("UNKNOWN " + command);
            }
            System.out.flush();
        }
        System.exit(0); // the test closed our stdin: it is gone
    }

    private static ActiveMQServer start(String host, int port, Path dataDir, String query) throws Exception {
        System.setProperty("rdma.host", host);
        System.setProperty("rdma.port", Integer.toString(port));
        FileDeploymentManager deployment = new FileDeploymentManager(LabBroker.configDir().resolve("broker.xml")
                .toUri().toString());
        FileConfiguration config = new FileConfiguration();
        deployment.addDeployable(config);
        deployment.readConfiguration();
        LabBroker.writable(config, dataDir, false).setJMXManagementEnabled(true);
        // the acceptor of broker.xml, with the bounds under test added to its URL (the plugin serves it over RDMA)
        config.getAcceptorConfigurations().removeIf(acceptor -> ACCEPTOR.equals(acceptor.getName()));
        config.addAcceptorConfiguration(ACCEPTOR, "tcp://" + host + ":" + port + "?protocols=CORE&" + query);
        ActiveMQServer server = new ActiveMQServerImpl(config, new ActiveMQJAASSecurityManager());
        server.start();
        if (!server.isActive()) {
            throw new IllegalStateException("broker did not become active");
        }
        return server;
    }

    /** Keeps the highest heap use any garbage collection left behind. */
    private static void watchGarbageCollections() {
        Set<String> heapPools = ManagementFactory.getMemoryPoolMXBeans().stream()
                .filter(pool -> pool.getType() == MemoryType.HEAP).map(MemoryPoolMXBean::getName)
                .collect(Collectors.toSet());
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            ((NotificationEmitter) gc).addNotificationListener((notification, handback) -> {
                if (!GarbageCollectionNotificationInfo.GARBAGE_COLLECTION_NOTIFICATION.equals(notification.getType())) {
                    return;
                }
                GarbageCollectionNotificationInfo info = GarbageCollectionNotificationInfo.from(
                        (CompositeData) notification.getUserData());
                long used = 0;
                for (Map.Entry<String, MemoryUsage> pool : info.getGcInfo().getMemoryUsageAfterGc().entrySet()) {
                    if (heapPools.contains(pool.getKey())) {
                        used += pool.getValue().getUsed();
                    }
                }
                PEAK_AFTER_GC.accumulateAndGet(used, Math::max);
            }, null, null);
        }
    }

    private static String stats(ActiveMQServer server, boolean fullGc) throws Exception {
        if (fullGc) {
            System.gc();
        }
        Map<String, Object> s = new TreeMap<>();
        s.put(fullGc ? "heapAfterGc" : "heapUsed", ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed());
        s.put("peakHeapAfterGc", PEAK_AFTER_GC.get());
        s.put("heapMax", Runtime.getRuntime().maxMemory());
        s.put("brokerConnections", server.getConnectionCount());
        MBeanServer mbeans = ManagementFactory.getPlatformMBeanServer();
        Set<ObjectName> names = mbeans.queryNames(new ObjectName(
                "org.apache.activemq.artemis:component=acceptors,subcomponent=rdma-transport,*"), null);
        if (names.size() != 1) {
            throw new IllegalStateException("expected the RDMA acceptor's transport MBean, found " + names);
        }
        ObjectName transport = names.iterator().next();
        for (String attribute : new String[] {"Connections", "ConnectionsAccepted", "ConnectionsRefused",
            "ProtocolErrors", "FramesReceived", "BytesReceived", "FramesSent", "RegisteredMemoryBytes",
            "SendPoolBytes", "Loops", "SharedReceivePools", "SharedReceivePoolBytes"}) {
            s.put(Character.toLowerCase(attribute.charAt(0)) + attribute.substring(1),
                    mbeans.getAttribute(transport, attribute));
        }
        return s.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue()).collect(Collectors.joining(" "));
    }
}
