package dev.artemisrdma.artemis;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;

import dev.artemisrdma.transport.config.TransportConfig;
import org.apache.activemq.artemis.api.config.ActiveMQDefaultConfiguration;
import org.apache.activemq.artemis.utils.ConfigurationHelper;

/**
 * The parameters of an RDMA acceptor or connector: the names users type in broker.xml URLs, broker properties,
 * {@code TransportConfiguration} maps and {@code rdma://} URLs, their defaults, and validation that names an unknown
 * key and lists the valid ones.
 *
 * <p>Keys this layer reads itself: {@value #HOST}, {@value #PORT}, {@value #BATCH_DELAY}, {@value #DIRECT_DELIVER}
 * and {@value #CONNECTIONS_ALLOWED} (acceptor only). Every key of {@link #TRANSPORT_KEYS} goes unchanged to the transport (its defaults and ranges
 * are the transport's). The acceptor also tolerates keys the broker reads itself: {@value #PROTOCOLS},
 * {@value #CLUSTER_CONNECTION} and {@value #SCHEME} (added by the broker's {@code tcp://} URL parser when an acceptor
 * is switched by {@link RdmaAcceptorPlugin}). The TLS keys of Artemis's Netty transport ({@link TlsEngines#ACCEPTOR_KEYS},
 * {@link TlsEngines#CONNECTOR_KEYS}: sslEnabled, the key and trust stores, client authentication, host verification,
 * ...) are read by {@link TlsEngines}; the {@code <mask-password>} keys the broker.xml parser adds to every acceptor
 * and connector ({@link #MASK_PASSWORD}, {@link #PASSWORD_CODEC}) apply to their passwords, as on Netty. None of them
 * is a transport key: a plain and a TLS endpoint with the same tuning share one transport.
 *
 * <p>Threads: constants (immutable sets and lists) and static functions of the map they are given, no other state,
 * so any thread; the acceptor and connector factories call them when an endpoint is made.
 */
public final class RdmaParameters {

    public static final String HOST = "host";
    public static final String PORT = "port";
    /** Milliseconds a batched write may wait for the next flush; 0 (the default) flushes every write, as Netty. */
    public static final String BATCH_DELAY = "batchDelay";
    /** Acceptor: deliver messages on the calling thread (Netty's default: true). */
    public static final String DIRECT_DELIVER = "directDeliver";
    /** Acceptor: connections open at once at most (the standard Artemis key); -1 (the default) for no limit. */
    public static final String CONNECTIONS_ALLOWED = "connectionsAllowed";
    public static final String PROTOCOLS = "protocols";
    public static final String SCHEME = "scheme";
    /** Connector: the {@code factory} tag of the client's meters (see {@link RdmaClientMetrics}); default host:port. */
    public static final String METRICS_NAME = "metricsName";
    /** The RDMA device an endpoint must use (a transport key; see {@link TransportConfig#device()}). */
    public static final String DEVICE = "device";
    /** Acceptor: the cluster connection whose topology its clients receive (the standard Artemis acceptor key). */
    public static final String CLUSTER_CONNECTION = "clusterConnection";
    /** Added to every acceptor and connector by the broker.xml parser when {@code <mask-password>} is set. */
    public static final String MASK_PASSWORD = ActiveMQDefaultConfiguration.getPropMaskPassword();
    /** Added with {@value #MASK_PASSWORD} when {@code <password-codec>} is set as well. */
    public static final String PASSWORD_CODEC = ActiveMQDefaultConfiguration.getPropPasswordCodec();

    public static final String DEFAULT_HOST = "localhost";
    public static final int DEFAULT_PORT = 61700;
    public static final int DEFAULT_BATCH_DELAY = 0;
    public static final boolean DEFAULT_DIRECT_DELIVER = true;
    public static final int DEFAULT_CONNECTIONS_ALLOWED = -1;

    /**
     * Tuning keys handed to the transport ({@link TransportConfig#fromMap}: receive slots, slot size, frame size,
     * credit threshold, send queue, signalling, inline data, write high-water mark, busy polling, completion threads
     * and queue entries, retries, connect timeout), sorted.
     */
    public static final List<String> TRANSPORT_KEYS = List.copyOf(new TreeSet<>(TransportConfig.KEYS));

    static final Set<String> CONNECTOR_KEYS = without(keys(List.of(HOST, PORT, BATCH_DELAY, METRICS_NAME,
            MASK_PASSWORD, PASSWORD_CODEC), TlsEngines.CONNECTOR_KEYS), TransportConfig.LISTENER_KEYS);
    static final Set<String> ACCEPTOR_KEYS = keys(List.of(HOST, PORT, BATCH_DELAY, DIRECT_DELIVER, CONNECTIONS_ALLOWED,
            PROTOCOLS, SCHEME, CLUSTER_CONNECTION, MASK_PASSWORD, PASSWORD_CODEC), TlsEngines.ACCEPTOR_KEYS);

    private RdmaParameters() {
    }

    /** {@code keys} less {@code listenerOnly}: who may connect means nothing to a connecting side. */
    private static Set<String> without(Set<String> keys, Set<String> listenerOnly) {
        Set<String> left = new TreeSet<>(keys);
        left.removeAll(listenerOnly);
        return Set.copyOf(left);
    }

    private static Set<String> keys(List<String> own, Set<String> tls) {
        Set<String> all = new TreeSet<>(own);
        all.addAll(tls);
        all.addAll(TRANSPORT_KEYS);
        return Set.copyOf(all);
    }

    /**
     * The transport configuration of {@code params}, parsed here once: the endpoint carries the typed value from
     * then on. Rejects any key not in {@code valid}, naming it and listing the valid keys, and any transport value
     * the transport would refuse, naming its key.
     */
    static TransportConfig parse(String what, Map<String, ?> params, Set<String> valid) {
        for (String key : params.keySet()) {
            if (!valid.contains(key)) {
                throw new IllegalArgumentException(what + ": unknown parameter '" + key + "'; valid parameters are "
                        + new TreeSet<>(valid));
            }
        }
        try {
            return TransportConfig.fromMap(transportSettings(params));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(what + ": " + e.getMessage(), e);
        }
    }

    /** The host, an IPv6 literal without the brackets a URL puts around it ({@code [fd00::1]} is {@code fd00::1}). */
    static String host(Map<String, ?> params) {
        return unbracket(ConfigurationHelper.getStringProperty(HOST, DEFAULT_HOST, params));
    }

    static String unbracket(String host) {
        return host != null && host.length() > 2 && host.startsWith("[") && host.endsWith("]")
                ? host.substring(1, host.length() - 1) : host;
    }

    static int port(Map<String, ?> params) {
        Object value = params.get(PORT);
        return value == null ? DEFAULT_PORT : TransportConfig.intValue(PORT, value, 0, 65_535); // 0: any free port
    }

    /** Milliseconds, as Netty's key: a whole number, 0 (no batching) or more; "10ms" or -1 are refused by name. */
    static int batchDelay(Map<String, ?> params) {
        Object value = params.get(BATCH_DELAY);
        try {
            return value == null ? DEFAULT_BATCH_DELAY : TransportConfig.intValue(BATCH_DELAY, value, 0, 60_000);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(e.getMessage() + " (milliseconds, a whole number such as 10; 0 turns "
                    + "batching off)", e);
        }
    }

    static String metricsName(Map<String, ?> params) {
        return ConfigurationHelper.getStringProperty(METRICS_NAME, host(params) + ":" + port(params), params);
    }

    /** The acceptor's connection limit, -1 for none; anything else below 1 is refused, naming the key. */
    static int connectionsAllowed(Map<String, ?> params) {
        Object value = params.get(CONNECTIONS_ALLOWED);
        if (value == null) {
            return DEFAULT_CONNECTIONS_ALLOWED;
        }
        int allowed;
        try {
            allowed = Integer.parseInt(value.toString().trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(CONNECTIONS_ALLOWED + ": not an integer: '" + value + "'");
        }
        if (allowed < 1 && allowed != -1) {
            throw new IllegalArgumentException(CONNECTIONS_ALLOWED + ": must be -1 (no limit) or at least 1, got "
                    + allowed);
        }
        return allowed;
    }

    /** true or false; Artemis's own parser would read "yes" as false without a word. */
    static boolean directDeliver(Map<String, ?> params) {
        Object value = params.get(DIRECT_DELIVER);
        return value == null ? DEFAULT_DIRECT_DELIVER : TransportConfig.booleanValue(DIRECT_DELIVER, value);
    }

    /** The transport tuning entries of {@code params}, in a stable order. */
    private static Map<String, Object> transportSettings(Map<String, ?> params) {
        Map<String, Object> settings = new LinkedHashMap<>();
        for (String key : TRANSPORT_KEYS) {
            Object value = params.get(key);
            if (value != null) {
                settings.put(key, value.toString());
            }
        }
        return settings;
    }

    /**
     * The parameters a client needs to reach an endpoint configured with {@code params}: host, port and tuning, but
     * not {@code device}: a device name is local to one machine, a client's devices have their own.
     */
    static Map<String, Object> connectorParams(Map<String, ?> params) {
        Map<String, Object> connector = new LinkedHashMap<>();
        connector.put(HOST, host(params));
        connector.put(PORT, port(params));
        connector.putAll(transportSettings(params));
        connector.remove(DEVICE);
        return connector;
    }

    /**
     * Same endpoint: same port, and the same host, as spelled or once resolved (an alias, a host name and its
     * address, "localhost" and "127.0.0.1"), as Netty's connector compares them: the hosts share a resolved
     * address. A host that does not resolve is only equal to the same spelling.
     */
    static boolean sameEndpoint(Map<String, ?> a, Map<String, ?> b) {
        if (port(a) != port(b)) {
            return false;
        }
        String hostA = host(a);
        String hostB = host(b);
        if (Objects.equals(hostA, hostB)) {
            return true;
        }
        try {
            List<InetAddress> addressesA = List.of(InetAddress.getAllByName(hostA));
            List<InetAddress> addressesB = List.of(InetAddress.getAllByName(hostB));
            // loopback names resolve to 127.0.0.1 or ::1 depending on /etc/hosts: any loopback is this machine
            return !Collections.disjoint(addressesA, addressesB)
                    || (addressesA.stream().allMatch(InetAddress::isLoopbackAddress)
                        && addressesB.stream().allMatch(InetAddress::isLoopbackAddress));
        } catch (UnknownHostException e) {
            return false;
        }
    }
}
