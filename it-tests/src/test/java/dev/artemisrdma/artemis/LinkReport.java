package dev.artemisrdma.artemis;

import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.stats.TransportStats;
import dev.artemisrdma.transport.tls.TlsChannel;
import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.api.core.client.TopologyMember;
import org.apache.activemq.artemis.core.postoffice.impl.LocalQueueBinding;
import org.apache.activemq.artemis.core.replication.ReplicationManager;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.ServerSession;
import org.apache.activemq.artemis.core.server.cluster.ClusterConnection;
import org.apache.activemq.artemis.core.server.cluster.RemoteQueueBinding;
import org.apache.activemq.artemis.spi.core.protocol.RemotingConnection;
import org.apache.activemq.artemis.spi.core.remoting.Connection;

/**
 * What carried a broker's links, from inside the broker (lab tests; in this package to read our connections' transport
 * counters): its acceptors and connectors by class, the connections it accepted by transport with their frame and
 * byte counts, the sessions opened by peers (cluster bridges, core bridges) by transport, its topology and its
 * replication link (and whether TLS carries them: {@code inboundTls}, {@code replicationTls} with the session's
 * protocol and cipher suite, {@code none} without). One line of {@code key=value} pairs separated by spaces.
 */
public final class LinkReport {

    private LinkReport() {
    }

    public static String of(ActiveMQServer server, String clusterUser) {
        Map<String, Object> report = new TreeMap<>();
        report.put("active", server.isActive());
        report.put("replicaSync", server.isReplicaSync());
        report.put("acceptors", server.getRemotingService() == null ? "" : server.getRemotingService().getAcceptors()
                .entrySet().stream().map(e -> e.getKey() + ":" + e.getValue().getClass().getSimpleName())
                .sorted().collect(Collectors.joining(",")));
        report.put("connectors", server.getConfiguration().getConnectorConfigurations().entrySet().stream()
                .map(e -> e.getKey() + ":" + simple(e.getValue())).sorted().collect(Collectors.joining(",")));
        int rdma = 0;
        int tls = 0;
        int other = 0;
        long framesIn = 0;
        long framesOut = 0;
        long bytesIn = 0;
        if (server.getRemotingService() != null) {
            for (RemotingConnection connection : server.getRemotingService().getConnections()) {
                if (connection.getTransportConnection() instanceof RdmaConnection c && c.channel() != null) {
                    rdma++;
                    tls += c.channel() instanceof TlsChannel ? 1 : 0;
                    TransportStats stats = c.channel().stats();
                    framesIn += stats.framesReceived();
                    framesOut += stats.framesSent();
                    bytesIn += stats.bytesReceived();
                } else {
                    other++;
                }
            }
        }
        report.put("inboundRdma", rdma);
        report.put("inboundTls", tls);
        report.put("inboundOther", other);
        report.put("framesIn", framesIn);
        report.put("framesOut", framesOut);
        report.put("bytesIn", bytesIn);
        int peerRdma = 0;
        int peerOther = 0;
        for (ServerSession session : server.getSessions()) {
            if (clusterUser.equals(session.getUsername())) {
                if (isRdma(session.getRemotingConnection().getTransportConnection())) {
                    peerRdma++;
                } else {
                    peerOther++;
                }
            }
        }
        report.put("peerSessionsRdma", peerRdma);
        report.put("peerSessionsOther", peerOther);
        int members = 0;
        int rdmaMembers = 0;
        int backups = 0;
        if (server.getClusterManager() != null) {
            for (ClusterConnection cluster : server.getClusterManager().getClusterConnections()) {
                for (TopologyMember member : cluster.getTopology().getMembers()) {
                    members++;
                    if (member.getPrimary() != null && simple(member.getPrimary()).startsWith("Rdma")) {
                        rdmaMembers++;
                    }
                    if (member.getBackup() != null && simple(member.getBackup()).startsWith("Rdma")) {
                        backups++;
                    }
                }
            }
        }
        // the application's queues (internal store-and-forward queues aside): messages held, and of them those out
        // for delivery to a consumer (a closed consumer's are back only once its cancel has been completed)
        long messages = 0;
        long delivering = 0;
        if (server.getPostOffice() != null) {
            for (LocalQueueBinding b : server.getPostOffice().getAllBindings()
                    .filter(b -> b instanceof LocalQueueBinding).map(b -> (LocalQueueBinding) b).toList()) {
                if (!b.getQueue().isInternalQueue() && !b.getAddress().toString().startsWith("$.artemis")
                        && !b.getAddress().toString().startsWith("activemq.")) {
                    messages += b.getQueue().getMessageCount();
                    delivering += b.getQueue().getDeliveringCount();
                }
            }
        }
        report.put("queuedMessages", messages);
        report.put("deliveringMessages", delivering);
        report.put("remoteConsumers", server.getPostOffice() == null ? 0 : server.getPostOffice().getAllBindings()
                .filter(b -> b instanceof RemoteQueueBinding).mapToInt(b -> ((RemoteQueueBinding) b).consumerCount())
                .sum());
        report.put("topology", members);
        report.put("topologyRdma", rdmaMembers);
        report.put("topologyRdmaBackups", backups);
        ReplicationManager replication = server.getReplicationManager();
        String link = "none";
        String linkTls = "none";
        if (replication != null && replication.getBackupTransportConnection() != null) {
            Connection transport = replication.getBackupTransportConnection().getTransportConnection();
            link = transport.getClass().getSimpleName();
            if (transport instanceof RdmaConnection c) {
                TransportStats stats = c.channel().stats();
                report.put("replicationFramesOut", stats.framesSent());
                report.put("replicationBytesOut", stats.bytesSent());
                linkTls = tls(c.channel());
                report.put("replicationChannel", c.channel().id()); // a new one after a reconnect
            }
        }
        report.put("replication", link);
        report.put("replicationTls", linkTls);
        return report.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue()).collect(Collectors.joining(" "));
    }

    /**
     * The TLS sessions of the broker's connections, counted by transport, protocol and cipher suite ({@code rdma
     * TLSv1.3 TLS_AES_256_GCM_SHA384}, {@code netty ...}); plain connections are not counted.
     */
    public static Map<String, Integer> tlsSessions(ActiveMQServer server) {
        Map<String, Integer> sessions = new TreeMap<>();
        for (RemotingConnection connection : server.getRemotingService().getConnections()) {
            Connection transport = connection.getTransportConnection();
            if (transport instanceof RdmaConnection c && c.channel() instanceof TlsChannel t) {
                sessions.merge("rdma " + t.describeSession(), 1, Integer::sum);
            } else if (transport instanceof org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnection n) {
                io.netty.handler.ssl.SslHandler ssl = n.getNettyChannel().pipeline()
                        .get(io.netty.handler.ssl.SslHandler.class);
                if (ssl != null) {
                    javax.net.ssl.SSLSession session = ssl.engine().getSession();
                    sessions.merge("netty " + session.getProtocol() + " " + session.getCipherSuite() + " ("
                            + ssl.engine().getClass().getSimpleName() + ")", 1, Integer::sum);
                }
            }
        }
        return sessions;
    }

    /** The transport counters of each RDMA connection the broker holds now (a TLS one's are its wire's). */
    public static java.util.List<TransportStats> rdmaStats(ActiveMQServer server) {
        java.util.List<TransportStats> all = new java.util.ArrayList<>();
        for (RemotingConnection connection : server.getRemotingService().getConnections()) {
            if (connection.getTransportConnection() instanceof RdmaConnection c && c.channel() != null) {
                all.add(c.channel().stats());
            }
        }
        return all;
    }

    /** The TLS session of a channel ({@code TLSv1.3/TLS_AES_256_GCM_SHA384}), {@code none} for a plain one. */
    private static String tls(RdmaChannel channel) {
        return channel instanceof TlsChannel t ? t.describeSession().replace(' ', '/') : "none";
    }

    private static boolean isRdma(Connection connection) {
        return connection instanceof RdmaConnection;
    }

    private static String simple(TransportConfiguration config) {
        String name = config.getFactoryClassName();
        return name.substring(name.lastIndexOf('.') + 1);
    }
}
