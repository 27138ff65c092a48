package dev.artemisrdma.artemis;

import java.util.Hashtable;
import java.util.Map;

import javax.naming.Context;
import javax.naming.NamingException;

import jakarta.jms.ConnectionFactory;
import org.apache.activemq.artemis.jndi.ActiveMQInitialContextFactory;

/**
 * A JNDI initial context factory (Jakarta Messaging) that also understands {@code rdma://} URLs, so an unchanged JMS
 * application moves to RDMA by its {@code jndi.properties} alone:
 *
 * <pre>
 * java.naming.factory.initial=dev.artemisrdma.artemis.RdmaInitialContextFactory
 * connectionFactory.ConnectionFactory=rdma://10.77.0.1:61700?reconnectAttempts=-1
 * queue.orders=orders
 * </pre>
 *
 * {@code connectionFactory.NAME} and {@code java.naming.provider.url} values starting with {@code rdma://} are built by
 * {@link RdmaConnectionFactories}; everything else (other URLs, {@code queue.*}, {@code topic.*}, dynamic contexts) is
 * Artemis's {@link ActiveMQInitialContextFactory} unchanged.
 */
public class RdmaInitialContextFactory extends ActiveMQInitialContextFactory {

    private static final String CONNECTION_FACTORY_PREFIX = "connectionFactory.";

    public RdmaInitialContextFactory() {
    }

    /** Checks the rdma URLs first, so a bad one fails with a message that says what is wrong with it. */
    @Override
    public Context getInitialContext(Hashtable<?, ?> environment) throws NamingException {
        for (Map.Entry<?, ?> entry : environment.entrySet()) {
            String key = String.valueOf(entry.getKey());
            boolean factoryEntry = key.startsWith(CONNECTION_FACTORY_PREFIX) || Context.PROVIDER_URL.equals(key);
            if (factoryEntry && entry.getValue() instanceof String url && RdmaConnectionFactories.isRdmaUrl(url)) {
                try {
                    RdmaConnectionFactories.create(url).close();
                } catch (IllegalArgumentException e) {
                    NamingException failure = new NamingException(key + ": " + e.getMessage());
                    failure.setRootCause(e);
                    throw failure;
                }
            }
        }
        return super.getInitialContext(environment);
    }

    @Override
    protected ConnectionFactory createConnectionFactory(String uri, String name) throws Exception {
        if (RdmaConnectionFactories.isRdmaUrl(uri)) {
            return RdmaConnectionFactories.create(uri, Map.of(), name);
        }
        return super.createConnectionFactory(uri, name);
    }

    @Override
    protected ConnectionFactory createConnectionFactory(String uri, Map<String, String> overrides, String name)
            throws Exception {
        if (RdmaConnectionFactories.isRdmaUrl(uri)) {
            return RdmaConnectionFactories.create(uri, overrides, name);
        }
        return super.createConnectionFactory(uri, overrides, name);
    }
}
