/**
 * Apache Artemis acceptor and connector over the RDMA transport (CORE protocol only).
 *
 * <h2>Broker</h2>
 * Copy {@code artemis-rdma-connector.jar} and {@code jna.jar} into the instance's {@code lib/}, then either
 * <ul>
 * <li>broker.xml alone: an acceptor written as {@code tcp://host:port?protocols=CORE[;tuning keys]} and
 * {@link dev.artemisrdma.artemis.RdmaAcceptorPlugin} naming it in {@code <broker-plugins>} (see
 * {@code config/broker.xml}); or</li>
 * <li>broker properties: {@code acceptorConfigurations.NAME.factoryClassName=dev.artemisrdma.artemis.RdmaAcceptorFactory}
 * and {@code acceptorConfigurations.NAME.params.host/port/...} (see {@code config/broker.properties}).</li>
 * </ul>
 *
 * <h2>Clients</h2>
 * <ul>
 * <li>{@code new TransportConfiguration("dev.artemisrdma.artemis.RdmaConnectorFactory", Map.of("host", h, "port", p))}
 * with {@code ActiveMQClient} or {@code new ActiveMQConnectionFactory(false, tc)};</li>
 * <li>{@link dev.artemisrdma.artemis.RdmaConnectionFactories#create(String)} with
 * {@code rdma://host:port?key=value} (transport keys and the usual client URL options);</li>
 * <li>JNDI: {@code java.naming.factory.initial=dev.artemisrdma.artemis.RdmaInitialContextFactory} and
 * {@code connectionFactory.NAME=rdma://...} (see {@code config/jndi.properties}).</li>
 * </ul>
 *
 * <h2>Parameters</h2>
 * {@code host}, {@code port} (default 61700), {@code batchDelay}, {@code directDeliver} (acceptor), {@code protocols}
 * (acceptor, must include CORE) and the transport tuning keys of {@code TransportConfig}; see
 * {@link dev.artemisrdma.artemis.RdmaParameters}. Unknown keys are refused by name.
 *
 * <h2>Runtime and test hook</h2>
 * All acceptors and connectors of a JVM share one fabric ({@link dev.artemisrdma.artemis.RdmaRuntime}); the system
 * property {@code dev.artemisrdma.fabric} names a {@code Supplier<Fabric>} class to use instead of the verbs fabric.
 */
package dev.artemisrdma.artemis;
