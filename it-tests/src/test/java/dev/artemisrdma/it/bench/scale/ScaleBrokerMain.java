package dev.artemisrdma.it.bench.scale;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.Map;
import java.util.Set;

import javax.management.AttributeNotFoundException;
import javax.management.MBeanServer;
import javax.management.ObjectName;

import dev.artemisrdma.artemis.RdmaAcceptorFactory;
import dev.artemisrdma.artemis.RdmaTransportMetricsMXBean;
import dev.artemisrdma.it.artemis.LabBroker;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.config.impl.ConfigurationImpl;
import org.apache.activemq.artemis.core.remoting.impl.netty.NettyAcceptorFactory;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.impl.ActiveMQServerImpl;
import org.apache.activemq.artemis.spi.core.security.ActiveMQJAASSecurityManager;

/**
 * The scale benchmark's broker: non-persistent, one RDMA acceptor with the given parameters (and a Netty TCP
 * acceptor for the baseline pass), JMX on so that the acceptor's transport counters
 * ({@link RdmaTransportMetricsMXBean}) can be read. Commands on stdin: {@code stats} prints one
 * {@code STATS key=value...} line, {@code exit} stops the broker and the JVM.
 *
 * <p>Arguments: host port params [tcpPort] (params: the RDMA acceptor's parameters, {@code key=value} separated by
 * {@code ;} or {@code &}, may be empty; tcpPort: also listen with Netty TCP there).
 */
public final class ScaleBrokerMain {

    private ScaleBrokerMain() {
    }

    public static void main(String[] args) throws Exception {
        Map<String, Object> params = ScaleParams.parse(args.length > 2 ? args[2] : "");
        params.put("host", args[0]);
        params.put("port", Integer.parseInt(args[1]));
        params.put("protocols", "CORE");
        ConfigurationImpl config = new ConfigurationImpl();
        LabBroker.writable(config, Files.createTempDirectory("scale-broker"), false);
        config.setJMXManagementEnabled(true);
        config.setName("scale-broker");
        config.addAcceptorConfiguration(new TransportConfiguration(RdmaAcceptorFactory.class.getName(), params,
                "rdma"));
        if (args.length > 3) {
            config.addAcceptorConfiguration(new TransportConfiguration(NettyAcceptorFactory.class.getName(),
                    Map.of("host", args[0], "port", Integer.parseInt(args[3]), "protocols", "CORE"), "tcp"));
        }
        ActiveMQServer server = new ActiveMQServerImpl(config, new ActiveMQJAASSecurityManager());
        server.start();
        ObjectName metrics = metrics();
        System.out.println("READY pid=" + ProcessHandle.current().pid() + " params=" + params);
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.equals("stats")) {
                System.out.println(stats(metrics) + " serverConnections=" + server.getConnectionCount());
            } else if (line.equals("exit")) {
                break;
            }
            System.out.flush();
        }
        server.stop();
        System.out.println("STOPPED");
        System.out.flush();
        System.exit(0);
    }

    /** The acceptor's transport MBean (attributes of {@link RdmaTransportMetricsMXBean}). */
    private static ObjectName metrics() throws Exception {
        Set<ObjectName> names = MBEANS.queryNames(
                new ObjectName("org.apache.activemq.artemis:subcomponent=rdma-transport,*"), null);
        if (names.size() != 1) {
            throw new IllegalStateException("expected the RDMA acceptor's transport MBean, found " + names);
        }
        return names.iterator().next();
    }

    /**
     * One line of the MBean's attributes; one the running connector lacks (an older build, see BASELINE_CLASSES)
     * reads -1.
     */
    private static String stats(ObjectName m) throws Exception {
        StringBuilder b = new StringBuilder("STATS");
        for (String[] a : ATTRIBUTES) {
            long value;
            try {
                value = ((Number) MBEANS.getAttribute(m, a[1])).longValue();
            } catch (AttributeNotFoundException e) {
                value = -1;
            }
            b.append(' ').append(a[0]).append('=').append(value);
        }
        return b.toString();
    }

    private static final MBeanServer MBEANS = ManagementFactory.getPlatformMBeanServer();
    private static final String[][] ATTRIBUTES = {
        {"connections", "Connections"}, {"accepted", "ConnectionsAccepted"}, {"refused", "ConnectionsRefused"},
        {"registeredBytes", "RegisteredMemoryBytes"}, {"sendPoolBytes", "SendPoolBytes"},
        {"sharedPoolBytes", "SharedReceivePoolBytes"}, {"sharedPools", "SharedReceivePools"},
        {"creditsRecalled", "SharedReceiveCreditsRecalled"},
        {"framesSent", "FramesSent"}, {"framesReceived", "FramesReceived"}, {"rnrRetryErrors", "RnrRetryErrors"},
        {"completionErrors", "CompletionErrors"}, {"creditStalls", "CreditStalls"}, {"loops", "Loops"},
        {"loopCpuNanos", "LoopCpuNanos"}, {"loopSpins", "LoopSpins"}, {"loopSpinHits", "LoopSpinHits"},
        {"loopSpinNanos", "LoopSpinNanos"}, {"loopBlocks", "LoopBlocks"}, {"loopWakeUps", "LoopWakeUps"},
    };
}
