package dev.artemisrdma.artemis;

import java.lang.invoke.MethodHandles;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.stream.Collectors;

import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.core.server.ActiveMQServer;
import org.apache.activemq.artemis.core.server.plugin.ActiveMQServerPlugin;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Turns named broker.xml acceptors into RDMA acceptors, so RDMA is enabled by editing broker.xml alone (broker.xml
 * cannot name an acceptor factory class: its URLs only know {@code tcp://} and {@code vm://}):
 *
 * <pre>{@code
 * <acceptors>
 *    <acceptor name="rdma">tcp://10.77.0.1:61700?protocols=CORE;receiveSlots=256</acceptor>
 * </acceptors>
 * <broker-plugins>
 *    <broker-plugin class-name="dev.artemisrdma.artemis.RdmaAcceptorPlugin">
 *       <property key="acceptors" value="rdma"/>
 *    </broker-plugin>
 * </broker-plugins>
 * }</pre>
 *
 * <p>When the plugin is registered, before the broker creates its acceptors, it registers an
 * {@link RdmaAcceptorFactory} under each named acceptor; the broker looks factories up by acceptor name first. The
 * URL's host, port and query keys (including the RDMA tuning keys, which the broker's TCP parser would otherwise
 * drop) become the RDMA acceptor's parameters. A name that matches no acceptor stops the broker with an error.
 */
public class RdmaAcceptorPlugin implements ActiveMQServerPlugin {

    /** Plugin property: comma-separated names of the acceptors to switch to RDMA. */
    public static final String ACCEPTORS = "acceptors";

    private static final Logger logger = LoggerFactory.getLogger(MethodHandles.lookup().lookupClass());

    private List<String> acceptors = List.of();

    public RdmaAcceptorPlugin() {
    }

    @Override
    public void init(Map<String, String> properties) {
        for (String key : properties.keySet()) {
            if (!ACCEPTORS.equals(key)) {
                throw new IllegalArgumentException("RdmaAcceptorPlugin: unknown property '" + key
                        + "'; valid properties are [" + ACCEPTORS + "]");
            }
        }
        String names = properties.getOrDefault(ACCEPTORS, "");
        acceptors = Arrays.stream(names.split(",")).map(String::trim).filter(s -> !s.isEmpty()).toList();
    }

    @Override
    public void registered(ActiveMQServer server) {
        if (acceptors.isEmpty()) {
            throw new IllegalArgumentException("RdmaAcceptorPlugin: property '" + ACCEPTORS
                    + "' names no acceptor; set it to the broker.xml acceptor name(s) to serve over RDMA");
        }
        Map<String, TransportConfiguration> configured = server.getConfiguration().getAcceptorConfigurations()
                .stream().collect(Collectors.toMap(TransportConfiguration::getName, tc -> tc, (a, b) -> b));
        for (String name : acceptors) {
            TransportConfiguration config = configured.get(name);
            if (config == null) {
                throw new IllegalArgumentException("RdmaAcceptorPlugin: no acceptor named '" + name
                        + "' in the broker configuration; acceptors are " + new TreeSet<>(configured.keySet()));
            }
            Map<String, Object> extra = config.getExtraParams() == null ? Map.of() : config.getExtraParams();
            server.getServiceRegistry().addAcceptorFactory(name, new RdmaAcceptorFactory(extra));
            logger.info("RdmaAcceptorPlugin: acceptor '{}' will be served over RDMA", name);
        }
    }

    List<String> acceptors() {
        return acceptors;
    }
}
