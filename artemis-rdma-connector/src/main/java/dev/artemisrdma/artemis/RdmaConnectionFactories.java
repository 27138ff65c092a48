package dev.artemisrdma.artemis;

import java.beans.BeanInfo;
import java.beans.IntrospectionException;
import java.beans.Introspector;
import java.beans.PropertyDescriptor;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.api.jms.ActiveMQJMSClient;
import org.apache.activemq.artemis.api.jms.JMSFactoryType;
import org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory;
import org.apache.activemq.artemis.core.remoting.impl.netty.TransportConstants;
import org.apache.activemq.artemis.jms.client.ActiveMQConnectionFactory;
import org.apache.activemq.artemis.uri.JMSConnectionOptions;
import org.apache.activemq.artemis.utils.uri.BeanSupport;
import org.apache.activemq.artemis.utils.uri.URISchema;

/**
 * Connection factories from {@code rdma://} URLs, which Artemis's own URL parser does not know:
 *
 * <pre>{@code
 * ActiveMQConnectionFactory cf = RdmaConnectionFactories.create("rdma://10.77.0.1:61700?reconnectAttempts=-1&receiveSlots=256");
 * }</pre>
 *
 * <p>The URL is {@code rdma://host[:port][?key=value[&key=value...]][#rdma://host2:port2,...]}. A key is either an
 * RDMA transport parameter ({@link RdmaParameters}: {@code batchDelay} and the tuning keys), which goes to every
 * connector, or a client option exactly as in a {@code tcp://} URL: a property of {@code ActiveMQConnectionFactory} or
 * its server locator ({@code reconnectAttempts}, {@code confirmationWindowSize}, {@code user}, ...), {@code ha} or
 * {@code type} ({@code CF}, {@code QUEUE_CF}, {@code TOPIC_CF}, {@code XA_CF}, ...). Any other key is refused, by name.
 * The fragment lists further brokers (e.g. a backup) reached with the same options; an entry of the fragment
 * written {@code tcp://host:port[?netty keys]} is a TCP fall-back: the connectors are then tried in the order written
 * ({@link InOrderConnectorPolicy}), so RDMA first and TCP only when it fails. The port defaults to
 * {@value RdmaParameters#DEFAULT_PORT}. IPv6 hosts are written in brackets: {@code rdma://[fd00::1]:61700}.
 *
 * <p>Its one job is this translation. Threads: static functions over constants, no state, so any thread; each call
 * builds a new factory that the caller owns.
 */
public final class RdmaConnectionFactories {

    public static final String SCHEME = "rdma";
    private static final Set<String> URL_OPTIONS = Set.of("ha", "type", "name");
    /** The server locator's property that picks the connector to try next. */
    private static final String LOAD_BALANCING_POLICY = "connectionLoadBalancingPolicyClassName";

    private RdmaConnectionFactories() {
    }

    /** True for a URL this class handles ({@code rdma://...}). */
    public static boolean isRdmaUrl(String url) {
        return url != null && url.trim().regionMatches(true, 0, SCHEME + "://", 0, SCHEME.length() + 3);
    }

    /** A connection factory for {@code url}; see the class documentation for the form. */
    public static ActiveMQConnectionFactory create(String url) {
        return create(url, Map.of(), null);
    }

    /**
     * A connection factory for {@code url} with {@code overrides} applied on top of its query, its transport
     * configurations named {@code name} (or the URL's {@code name} option) when not null.
     */
    public static ActiveMQConnectionFactory create(String url, Map<String, String> overrides, String name) {
        URI uri = parse(url);
        Map<String, String> query = URISchema.parseQuery(uri.getRawQuery(), overrides);
        Map<String, Object> transport = new HashMap<>();
        Map<String, String> options = new HashMap<>();
        for (Map.Entry<String, String> entry : query.entrySet()) {
            if (RdmaParameters.CONNECTOR_KEYS.contains(entry.getKey())) {
                transport.put(entry.getKey(), entry.getValue());
            } else {
                options.put(entry.getKey(), entry.getValue());
            }
        }
        transport.remove(RdmaParameters.HOST); // the URL's authority says where; the query only tunes
        transport.remove(RdmaParameters.PORT);
        checkOptions(url, options.keySet());
        String configName = options.getOrDefault("name", name);

        List<TransportConfiguration> connectors = new ArrayList<>();
        connectors.add(connector(uri, transport, configName));
        String fragment = uri.getFragment();
        boolean tcpFallback = false;
        if (fragment != null && !fragment.isBlank()) {
            for (String other : fragment.split(",")) {
                String entry = other.trim();
                if (isTcpUrl(entry)) {
                    // a TCP fall-back: tried after the RDMA connectors before it, in order (InOrderConnectorPolicy)
                    connectors.add(tcpConnector(url, entry, configName));
                    tcpFallback = true;
                    continue;
                }
                URI otherUri = parse(entry);
                connectors.add(connector(otherUri, transport, configName == null ? null : configName + ":" + otherUri));
            }
        }
        if (tcpFallback && !options.containsKey(LOAD_BALANCING_POLICY)) {
            options.put(LOAD_BALANCING_POLICY, InOrderConnectorPolicy.class.getName());
        }
        try {
            JMSConnectionOptions jmsOptions = BeanSupport.setData(uri, new JMSConnectionOptions(), options);
            JMSFactoryType type = JMSConnectionOptions.convertCFType(options.get("type"));
            if (type == null) {
                throw new IllegalArgumentException("rdma URL " + url + ": unknown type '" + options.get("type")
                        + "'; valid types are " + List.of(JMSFactoryType.values()));
            }
            TransportConfiguration[] array = connectors.toArray(new TransportConfiguration[0]);
            ActiveMQConnectionFactory factory = jmsOptions.isHa()
                    ? ActiveMQJMSClient.createConnectionFactoryWithHA(type, array)
                    : ActiveMQJMSClient.createConnectionFactoryWithoutHA(type, array);
            Map<String, String> beanOptions = new HashMap<>(options);
            beanOptions.keySet().removeAll(URL_OPTIONS);
            BeanSupport.setData(uri, factory.getServerLocator(), beanOptions);
            BeanSupport.setData(uri, factory, beanOptions);
            return factory;
        } catch (IllegalArgumentException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalArgumentException("rdma URL " + url + ": invalid client option: " + e.getMessage(), e);
        }
    }

    private static boolean isTcpUrl(String url) {
        return url.regionMatches(true, 0, "tcp://", 0, 6);
    }

    /**
     * Artemis's Netty connector for a {@code tcp://host:port[?key=value...]} entry of the fragment, with that entry's
     * own keys (Netty's: {@code sslEnabled}, {@code trustStorePath}, ...); none of the RDMA URL's transport keys apply.
     */
    private static TransportConfiguration tcpConnector(String url, String entry, String configName) {
        try {
            URI tcp = new URI(entry);
            if (tcp.getHost() == null) {
                throw new IllegalArgumentException("rdma URL " + url + ": the fall-back " + entry + " names no host");
            }
            Map<String, Object> params = new HashMap<>(URISchema.parseQuery(tcp.getRawQuery(), Map.of()));
            params.put(TransportConstants.HOST_PROP_NAME, RdmaParameters.unbracket(tcp.getHost()));
            params.put(TransportConstants.PORT_PROP_NAME, tcp.getPort() < 0 ? TransportConstants.DEFAULT_PORT
                    : tcp.getPort());
            return new TransportConfiguration(NettyConnectorFactory.class.getName(), params,
                    configName == null ? null : configName + ":" + entry);
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException("rdma URL " + url + ": malformed fall-back '" + entry + "': "
                    + e.getMessage(), e);
        }
    }

    private static URI parse(String url) {
        if (!isRdmaUrl(url)) {
            throw new IllegalArgumentException("not an rdma URL: '" + url + "'; expected rdma://host:port?key=value");
        }
        try {
            URI uri = new URI(url.trim());
            if (uri.getHost() == null) {
                throw new IllegalArgumentException("rdma URL " + url + " names no host (an IPv6 address goes in "
                        + "brackets: rdma://[fd00::1]:61700)");
            }
            return uri;
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException("malformed rdma URL '" + url + "': " + e.getMessage(), e);
        }
    }

    private static TransportConfiguration connector(URI uri, Map<String, Object> transport, String name) {
        Map<String, Object> params = new HashMap<>(transport);
        params.put(RdmaParameters.HOST, RdmaParameters.unbracket(uri.getHost()));
        params.put(RdmaParameters.PORT, uri.getPort() < 0 ? RdmaParameters.DEFAULT_PORT : uri.getPort());
        return new TransportConfiguration(RdmaConnectorFactory.class.getName(), params, name);
    }

    private static void checkOptions(String url, Set<String> keys) {
        Set<String> clientOptions = null;
        for (String key : keys) {
            if (URL_OPTIONS.contains(key)) {
                continue;
            }
            if (clientOptions == null) {
                clientOptions = clientOptions();
            }
            if (!clientOptions.contains(key)) {
                throw new IllegalArgumentException("rdma URL " + url.replaceAll("\\?.*", "?...") + ": unknown parameter '"
                        + key + "'; RDMA transport parameters are "
                        + new TreeSet<>(subtract(RdmaParameters.CONNECTOR_KEYS, RdmaParameters.HOST, RdmaParameters.PORT,
                                RdmaParameters.MASK_PASSWORD, RdmaParameters.PASSWORD_CODEC))
                        + ", client options are " + URL_OPTIONS + " and the connection factory properties "
                        + clientOptions);
            }
        }
    }

    private static Set<String> subtract(Set<String> from, String... remove) {
        Set<String> result = new TreeSet<>(from);
        result.removeAll(List.of(remove));
        return result;
    }

    /** Writable bean properties of the connection factory and its server locator: what a URL may set. */
    private static Set<String> clientOptions() {
        Set<String> names = new TreeSet<>();
        ActiveMQConnectionFactory probe = new ActiveMQConnectionFactory(false,
                new TransportConfiguration(RdmaConnectorFactory.class.getName()));
        try {
            addWritable(names, probe.getClass());
            addWritable(names, probe.getServerLocator().getClass());
        } catch (IntrospectionException e) {
            throw new IllegalStateException("cannot list the connection factory properties", e);
        } finally {
            probe.close();
        }
        return names;
    }

    private static void addWritable(Set<String> names, Class<?> beanClass) throws IntrospectionException {
        BeanInfo info = Introspector.getBeanInfo(beanClass);
        for (PropertyDescriptor descriptor : info.getPropertyDescriptors()) {
            if (descriptor.getWriteMethod() != null) {
                names.add(descriptor.getName());
            }
        }
    }
}
