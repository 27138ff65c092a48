package dev.artemisrdma.transport.api;

import java.net.InetSocketAddress;
import java.time.Duration;

import javax.net.ssl.SSLEngine;

/**
 * Makes the JDK {@link SSLEngine} of each connection of one TLS endpoint: a listener's engines are in server mode, a
 * connector's in client mode, each with its protocols, cipher suites, client authentication, host verification and
 * SNI already set. The transport runs the TLS handshake in frames once the RDMA connection is established, and only
 * then offers the connection to the application; it never configures the engine itself.
 */
public interface TlsEngineFactory {

    /**
     * A new engine for one connection with {@code peer} (the listener's peer, or the connector's target).
     *
     * @throws IllegalStateException when no engine can be made (a store that cannot be read, a protocol or suite the
     *                               JDK does not have); the message names the key to fix
     */
    SSLEngine newEngine(InetSocketAddress peer);

    /** How long the TLS handshake may take once the RDMA connection is up; a peer that takes longer is disconnected. */
    Duration handshakeTimeout();
}
