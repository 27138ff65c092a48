package dev.artemisrdma.artemis;

import java.lang.invoke.MethodHandles;
import java.net.InetSocketAddress;
import java.security.KeyStore;
import java.security.KeyStoreException;
import java.security.NoSuchProviderException;
import java.security.UnrecoverableKeyException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Stream;

import javax.net.ssl.SNIHostName;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLParameters;

import dev.artemisrdma.transport.api.TlsEngineFactory;
import dev.artemisrdma.transport.config.TransportConfig;
import org.apache.activemq.artemis.api.config.ActiveMQDefaultConfiguration;
import org.apache.activemq.artemis.api.core.Pair;
import org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnector;
import org.apache.activemq.artemis.core.remoting.impl.netty.TransportConstants;
import org.apache.activemq.artemis.core.remoting.impl.ssl.SSLSupport;
import org.apache.activemq.artemis.spi.core.remoting.ssl.SSLContextConfig;
import org.apache.activemq.artemis.spi.core.remoting.ssl.SSLContextFactoryProvider;
import org.apache.activemq.artemis.utils.ConfigurationHelper;
import org.apache.activemq.artemis.utils.PasswordMaskingUtil;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The TLS of one RDMA acceptor or connector, from the SSL keys of Artemis's Netty transport with their meanings and
 * defaults ({@code NettyAcceptor}, {@code NettyConnector}, {@code TransportConstants}): null when {@value #SSL_ENABLED}
 * is false, else the {@link TlsEngineFactory} the transport asks for each connection's {@link SSLEngine}.
 *
 * <p>Artemis's own code loads the stores and makes the context: passwords go through
 * {@link ConfigurationHelper#getPasswordProperty} ({@code ENC(...)}, {@code activemq.usemaskedpassword},
 * {@code activemq.passwordcodec}), store providers and types through {@link SSLSupport#getValidProviderAndType}, the
 * context comes from {@link SSLContextFactoryProvider}'s factory with an {@link SSLContextConfig}. Each engine is set
 * up as {@code NettyAcceptor.getSslHandler} (server mode; needClientAuth, else wantClientAuth; cipher suites, then
 * protocols or the engine's own again; SSLv3 and SSLv2Hello taken out; verifyHost as HTTPS endpoint identification;
 * sniHost as an SNI matcher) or {@code NettyConnector}'s channel initializer (client mode; wantClientAuth; cipher
 * suites and protocols; verifyHost; sniHost as the server name) set them up with the JDK provider. A connector with
 * forceSSLParameters=false takes the stores of the system properties {@code org.apache.activemq.ssl.*}, then
 * {@code javax.net.ssl.*}, before its own keys, as Netty's does.
 *
 * <p>Made in two steps: {@link #settings} reads and checks the keys (no file is read: an acceptor's or connector's
 * factory refuses a bad value at once, naming the key), {@link #TlsEngines(Settings)} loads the stores and makes the
 * context, once per acceptor or connector, again on {@link #reload()}. Only the JDK's engine is supported
 * ({@code sslProvider=OPENSSL} is refused).
 *
 * <p>Threads: {@link #newEngine} runs on the transport's threads, {@link #reload()} on Artemis's; the context is a
 * volatile reference, everything else is fixed at construction.
 */
final class TlsEngines implements TlsEngineFactory {

    private static final Logger logger = LoggerFactory.getLogger(MethodHandles.lookup().lookupClass());

    public static final String SSL_ENABLED = TransportConstants.SSL_ENABLED_PROP_NAME;
    public static final String KEY_STORE_PATH = TransportConstants.KEYSTORE_PATH_PROP_NAME;
    public static final String KEY_STORE_PASSWORD = TransportConstants.KEYSTORE_PASSWORD_PROP_NAME;
    public static final String KEY_STORE_TYPE = TransportConstants.KEYSTORE_TYPE_PROP_NAME;
    public static final String KEY_STORE_PROVIDER = TransportConstants.KEYSTORE_PROVIDER_PROP_NAME;
    public static final String KEY_STORE_ALIAS = TransportConstants.KEYSTORE_ALIAS_PROP_NAME;
    public static final String KEY_PASSWORD = TransportConstants.KEY_PASSWORD_PROP_NAME;
    public static final String TRUST_STORE_PATH = TransportConstants.TRUSTSTORE_PATH_PROP_NAME;
    public static final String TRUST_STORE_PASSWORD = TransportConstants.TRUSTSTORE_PASSWORD_PROP_NAME;
    public static final String TRUST_STORE_TYPE = TransportConstants.TRUSTSTORE_TYPE_PROP_NAME;
    public static final String TRUST_STORE_PROVIDER = TransportConstants.TRUSTSTORE_PROVIDER_PROP_NAME;
    public static final String CRL_PATH = TransportConstants.CRL_PATH_PROP_NAME;
    public static final String VERIFY_HOST = TransportConstants.VERIFY_HOST_PROP_NAME;
    public static final String ENABLED_PROTOCOLS = TransportConstants.ENABLED_PROTOCOLS_PROP_NAME;
    public static final String ENABLED_CIPHER_SUITES = TransportConstants.ENABLED_CIPHER_SUITES_PROP_NAME;
    public static final String SNI_HOST = TransportConstants.SNIHOST_PROP_NAME;
    public static final String SSL_PROVIDER = TransportConstants.SSL_PROVIDER;
    /** Acceptor only. */
    public static final String NEED_CLIENT_AUTH = TransportConstants.NEED_CLIENT_AUTH_PROP_NAME;
    /** Acceptor only. */
    public static final String WANT_CLIENT_AUTH = TransportConstants.WANT_CLIENT_AUTH_PROP_NAME;
    /** Acceptor only: seconds; 0 for none, as Netty's {@code SslHandler}. */
    public static final String SSL_HANDSHAKE_TIMEOUT = TransportConstants.SSL_HANDSHAKE_TIMEOUT;
    /** Acceptor only: read by the broker, which then calls the acceptor's reload when a store file changes. */
    public static final String SSL_AUTO_RELOAD = TransportConstants.SSL_AUTO_RELOAD_PROP_NAME;
    /** Connector only. */
    public static final String TRUST_ALL = TransportConstants.TRUST_ALL_PROP_NAME;
    /** Connector only: the keys win over the {@code javax.net.ssl.*} and {@code org.apache.activemq.ssl.*} ones. */
    public static final String FORCE_SSL_PARAMETERS = TransportConstants.FORCE_SSL_PARAMETERS;

    /** The TLS keys of both sides. */
    static final Set<String> KEYS = Set.of(SSL_ENABLED, KEY_STORE_PATH, KEY_STORE_PASSWORD, KEY_STORE_TYPE,
            KEY_STORE_PROVIDER, KEY_STORE_ALIAS, KEY_PASSWORD, TRUST_STORE_PATH, TRUST_STORE_PASSWORD, TRUST_STORE_TYPE,
            TRUST_STORE_PROVIDER, CRL_PATH, VERIFY_HOST, ENABLED_PROTOCOLS, ENABLED_CIPHER_SUITES, SNI_HOST,
            SSL_PROVIDER);
    /** The TLS keys of an acceptor: {@link #KEYS} and client authentication, handshake timeout, auto reload. */
    static final Set<String> ACCEPTOR_KEYS = union(KEYS, NEED_CLIENT_AUTH, WANT_CLIENT_AUTH, SSL_HANDSHAKE_TIMEOUT,
            SSL_AUTO_RELOAD);
    /** The TLS keys of a connector: {@link #KEYS}, trustAll and forceSSLParameters. */
    static final Set<String> CONNECTOR_KEYS = union(KEYS, TRUST_ALL, FORCE_SSL_PARAMETERS);

    /** Netty's {@code SslHandler} default, which NettyConnector keeps: the connector has no key for it. */
    static final Duration CONNECTOR_HANDSHAKE_TIMEOUT = Duration.ofSeconds(10);
    /** The longest sslHandshakeTimeout taken, in seconds (365 days, the transport's longest timeout). */
    static final int MAX_HANDSHAKE_TIMEOUT_SECONDS = 365 * 24 * 3600;

    /** Which side's keys, defaults and engine set-up. */
    enum Side {
        ACCEPTOR, CONNECTOR
    }

    private final Settings settings;
    private final AtomicBoolean protocolWarning = new AtomicBoolean();
    private volatile SSLContext context;

    /**
     * Loads the stores and makes the context of {@code settings}.
     *
     * @throws IllegalArgumentException naming the key whose store, password, type, provider or alias cannot be used
     * @throws IllegalStateException    when no context can be made for another reason
     */
    TlsEngines(Settings settings) {
        this.settings = Objects.requireNonNull(settings, "settings");
        this.context = load();
    }

    /** The engines of an acceptor configured with {@code params}; null when sslEnabled is false. */
    static TlsEngines acceptor(Map<String, ?> params) {
        Settings settings = settings(Side.ACCEPTOR, params);
        return settings == null ? null : new TlsEngines(settings);
    }

    /**
     * The engines of a connector configured with {@code params} (the stores of the system properties at this
     * moment, unless forceSSLParameters); null when sslEnabled is false.
     */
    static TlsEngines connector(Map<String, ?> params) {
        Settings settings = settings(Side.CONNECTOR, params);
        return settings == null ? null : new TlsEngines(settings);
    }

    /**
     * The TLS keys of {@code params} for {@code side}, read and checked without reading a file; null when sslEnabled
     * is false (its booleans, timeout, provider and sniHost are checked all the same: a bad value is refused whether
     * TLS is on or not).
     *
     * @throws IllegalArgumentException naming the key of a malformed value (a boolean that is not true or false, a
     *                                  handshake timeout that is not a whole number of seconds, an sslProvider other
     *                                  than JDK, an sniHost that is no host name or pattern, a password that cannot be
     *                                  decoded), or when an acceptor has TLS on and neither a key store path nor a
     *                                  provider
     */
    static Settings settings(Side side, Map<String, ?> params) {
        if (Collections.disjoint(params.keySet(), side == Side.ACCEPTOR ? ACCEPTOR_KEYS : CONNECTOR_KEYS)) {
            // a plain endpoint: nothing to check, and Artemis's Netty TransportConstants stays untouched (its class
            // initialisation needs Netty's SOCKS codec, which a broker or client class path may lack: the
            // compatibility lab's Artemis 2.43.0 broker failed to start a plain RDMA acceptor for want of it)
            return null;
        }
        Settings settings = new Settings(side, params);
        return settings.enabled ? settings : null;
    }

    @Override
    public SSLEngine newEngine(InetSocketAddress peer) {
        SSLContext current = context;
        SSLEngine engine;
        if (settings.side == Side.CONNECTOR) {
            // as NettyConnector: the host and port the connector was given, whichever address they resolved to
            engine = settings.host != null && settings.port != -1
                    ? current.createSSLEngine(settings.host, settings.port) : current.createSSLEngine();
        } else {
            // as NettyAcceptor: the peer's address as the transport saw it (no name lookup)
            engine = peer != null && peer.getPort() != 0
                    ? current.createSSLEngine(peer.getHostString(), peer.getPort()) : current.createSSLEngine();
        }
        configure(engine);
        return engine;
    }

    @Override
    public Duration handshakeTimeout() {
        return settings.handshakeTimeout;
    }

    /**
     * Loads the stores again and makes a new context: connections from now on use it, established ones go on with
     * theirs. When the new stores cannot be used the context stays as it was.
     *
     * @throws IllegalArgumentException or IllegalStateException as the constructor, naming the key
     */
    void reload() {
        context = load();
    }

    /** The side this was made for. */
    Side side() {
        return settings.side;
    }

    /** The context new engines come from (tests: a reload makes a new one). */
    SSLContext context() {
        return context;
    }

    /** The store and context parts of the settings, as Artemis's SSLSupport takes them. */
    SSLContextConfig contextConfig() {
        return settings.contextConfig();
    }

    private SSLContext load() {
        SSLContextConfig config = settings.contextConfig();
        SSLContext made;
        try {
            made = SSLContextFactoryProvider.getSSLContextFactory().getSSLContext(config, settings.params);
        } catch (Exception e) {
            throw diagnose(config, e);
        }
        checkAlias(config);
        // one engine set up now, so that a protocol or cipher suite this JVM does not have is refused here
        configure(made.createSSLEngine());
        return made;
    }

    /** Sets up {@code engine} as NettyAcceptor.getSslHandler or NettyConnector's channel initializer do. */
    private void configure(SSLEngine engine) {
        boolean acceptor = settings.side == Side.ACCEPTOR;
        engine.setUseClientMode(!acceptor);
        if (!acceptor) {
            engine.setWantClientAuth(true);
        } else if (settings.needClientAuth) {
            engine.setNeedClientAuth(true);
        } else if (settings.wantClientAuth) {
            engine.setWantClientAuth(true);
        }
        // setting the cipher suites resets the protocols: the engine's own are set again when none are configured
        String[] original = engine.getEnabledProtocols();
        if (settings.cipherSuites != null) {
            try {
                engine.setEnabledCipherSuites(settings.cipherSuites);
            } catch (IllegalArgumentException e) {
                throw new IllegalStateException(ENABLED_CIPHER_SUITES + " '" + settings.cipherSuitesText + "': "
                        + e.getMessage() + "; this JVM supports "
                        + SSLSupport.parseArrayIntoCommandSeparatedList(engine.getSupportedCipherSuites()), e);
            }
        }
        if (settings.protocols != null) {
            try {
                engine.setEnabledProtocols(settings.protocols);
            } catch (IllegalArgumentException e) {
                throw new IllegalStateException(ENABLED_PROTOCOLS + " '" + settings.protocolsText + "': "
                        + e.getMessage() + "; this JVM supports "
                        + SSLSupport.parseArrayIntoCommandSeparatedList(engine.getSupportedProtocols()), e);
            }
        } else {
            engine.setEnabledProtocols(original);
        }
        if (acceptor) {
            stripObsoleteProtocols(engine);
        }
        if (settings.verifyHost) {
            SSLParameters parameters = engine.getSSLParameters();
            parameters.setEndpointIdentificationAlgorithm("HTTPS");
            engine.setSSLParameters(parameters);
        }
        if (settings.sniHost != null) {
            SSLParameters parameters = engine.getSSLParameters();
            if (acceptor) {
                parameters.setSNIMatchers(List.of(SNIHostName.createSNIMatcher(settings.sniHost)));
            } else {
                parameters.setServerNames(List.of(new SNIHostName(settings.sniHost)));
            }
            engine.setSSLParameters(parameters);
        }
    }

    /** SSLv3 (POODLE) and SSLv2Hello never, as NettyAcceptor; said once. */
    private void stripObsoleteProtocols(SSLEngine engine) {
        List<String> kept = new ArrayList<>();
        List<String> dropped = new ArrayList<>();
        for (String protocol : engine.getEnabledProtocols()) {
            if (protocol.equalsIgnoreCase("SSLv3") || protocol.equals("SSLv2Hello")) {
                dropped.add(protocol);
            } else {
                kept.add(protocol);
            }
        }
        if (dropped.isEmpty()) {
            return;
        }
        if (kept.isEmpty()) {
            throw new IllegalStateException(ENABLED_PROTOCOLS + " '" + settings.protocolsText + "': nothing is left once "
                    + dropped + " are taken out (never enabled on an acceptor); name TLSv1.2 or TLSv1.3");
        }
        if (protocolWarning.compareAndSet(false, true)) {
            logger.warn("TLS: {} taken out of {} (never enabled on an acceptor, as Artemis's Netty acceptor)", dropped,
                    ENABLED_PROTOCOLS);
        }
        engine.setEnabledProtocols(kept.toArray(new String[0]));
    }

    /**
     * A keyStoreAlias that names no key entry is refused now: the JDK's key manager would otherwise present no
     * certificate and every handshake would fail without naming the key.
     */
    private static void checkAlias(SSLContextConfig config) {
        String alias = config.getKeystoreAlias();
        if (alias == null || !isSet(config.getKeystorePath())) {
            return;
        }
        KeyStore store;
        try {
            store = SSLSupport.loadKeystore(config.getKeystoreProvider(), config.getKeystoreType(),
                    config.getKeystorePath(), config.getKeystorePassword());
            if (store.isKeyEntry(alias)) {
                return;
            }
            List<String> keys = new ArrayList<>();
            for (String name : Collections.list(store.aliases())) {
                if (store.isKeyEntry(name)) {
                    keys.add(name);
                }
            }
            throw new IllegalArgumentException(KEY_STORE_ALIAS + " '" + alias + "' names no key in key store '"
                    + config.getKeystorePath() + "'; its keys are " + keys);
        } catch (IllegalArgumentException e) {
            throw e;
        } catch (Exception e) {
            throw new IllegalStateException(KEY_STORE_PATH + " '" + config.getKeystorePath() + "' cannot be read: "
                    + describe(e), e);
        }
    }

    /**
     * The key to blame for a context that could not be made: the key store, then the trust store, each opened alone
     * with Artemis's {@link SSLSupport#loadKeystore}; then the key's password, the CRL; else the whole context.
     */
    private static RuntimeException diagnose(SSLContextConfig config, Exception failure) {
        boolean keyStore = isSet(config.getKeystorePath()) || isPkcs11(config.getKeystoreProvider());
        if (keyStore) {
            RuntimeException problem = storeProblem(true, config.getKeystoreProvider(), config.getKeystoreType(),
                    config.getKeystorePath(), config.getKeystorePassword());
            if (problem != null) {
                return problem;
            }
        }
        boolean trustStore = !config.isTrustAll() && config.getTrustManagerFactoryPlugin() == null
                && (isSet(config.getTruststorePath()) || isPkcs11(config.getTruststoreProvider()));
        if (trustStore) {
            RuntimeException problem = storeProblem(false, config.getTruststoreProvider(), config.getTruststoreType(),
                    config.getTruststorePath(), config.getTruststorePassword());
            if (problem != null) {
                return problem;
            }
        }
        if (keyStore && causedBy(failure, UnrecoverableKeyException.class)) {
            String key = config.getKeyPassword() != null ? KEY_PASSWORD : KEY_STORE_PASSWORD;
            return new IllegalArgumentException(key + " does not open the key in key store '"
                    + config.getKeystorePath() + "': " + describe(failure), failure);
        }
        if (config.getCrlPath() != null) {
            return new IllegalArgumentException(CRL_PATH + " '" + config.getCrlPath() + "' cannot be used: "
                    + describe(failure), failure);
        }
        return new IllegalStateException("the SSL context cannot be made from the key and trust stores: "
                + describe(failure), failure);
    }

    /** Why Artemis cannot open this store, naming the key to fix; null when it opens. */
    private static RuntimeException storeProblem(boolean key, String provider, String type, String path,
                                                 String password) {
        String prefix = key ? "keyStore" : "trustStore";
        String what = key ? "key store" : "trust store";
        try {
            SSLSupport.loadKeystore(provider, type, path, password);
            return null;
        } catch (KeyStoreException e) {
            return new IllegalArgumentException(prefix + "Type '" + type + "' is not a store type this JVM can read"
                    + (provider != null ? " with provider " + provider : "") + ": " + describe(e), e);
        } catch (NoSuchProviderException e) {
            return new IllegalArgumentException(prefix + "Provider '" + provider + "' is not an installed security "
                    + "provider: " + describe(e), e);
        } catch (Exception e) {
            if (causedBy(e, UnrecoverableKeyException.class)) {
                return new IllegalArgumentException(prefix + "Password does not open " + what + " '" + path + "': "
                        + describe(e), e);
            }
            return new IllegalArgumentException(prefix + "Path '" + path + "' cannot be read as a " + type + " "
                    + what + " (a file, a URL or a class path resource): " + describe(e), e);
        }
    }

    private static boolean causedBy(Throwable failure, Class<? extends Throwable> type) {
        for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (type.isInstance(t)) {
                return true;
            }
        }
        return false;
    }

    /** The messages of a failure and its causes, each once. */
    private static String describe(Throwable failure) {
        List<String> parts = new ArrayList<>();
        for (Throwable t = failure; t != null && parts.size() < 5; t = t.getCause() == t ? null : t.getCause()) {
            String message = t.getMessage() != null ? t.getMessage() : t.getClass().getSimpleName();
            if (parts.stream().noneMatch(p -> p.contains(message))) {
                parts.add(message);
            }
        }
        return String.join(": ", parts);
    }

    private static boolean isSet(String path) {
        return path != null && !path.isEmpty() && !path.equalsIgnoreCase(SSLSupport.NONE);
    }

    private static boolean isPkcs11(String provider) {
        return provider != null && provider.toUpperCase(Locale.ROOT).contains("PKCS11");
    }

    private static Set<String> union(Set<String> keys, String... more) {
        Set<String> all = new TreeSet<>(keys);
        all.addAll(List.of(more));
        return Set.copyOf(all);
    }

    /**
     * The TLS keys of one acceptor or connector, read and checked: booleans strictly (true or false, any case), as
     * the project's other keys, the rest as Artemis reads them.
     */
    static final class Settings {
        final Side side;
        final boolean enabled;
        /** Passed to Artemis's context factory as its additional options, as Netty passes its configuration. */
        final Map<String, Object> params;
        final String host;
        final int port;
        final boolean needClientAuth;
        final boolean wantClientAuth;
        final boolean verifyHost;
        final boolean trustAll;
        final boolean forceSslParameters;
        final String cipherSuitesText;
        final String[] cipherSuites;
        final String protocolsText;
        final String[] protocols;
        final String sniHost;
        final Duration handshakeTimeout;
        final String keyStoreProvider;
        final String keyStoreType;
        final String keyStorePath;
        final String keyStorePassword;
        final String keyPassword;
        final String keyStoreAlias;
        final String trustStoreProvider;
        final String trustStoreType;
        final String trustStorePath;
        final String trustStorePassword;
        final String crlPath;
        final String passwordCodec;

        private Settings(Side side, Map<String, ?> params) {
            this.side = side;
            boolean acceptor = side == Side.ACCEPTOR;
            this.params = Collections.unmodifiableMap(new java.util.HashMap<>(params));
            this.enabled = bool(params, SSL_ENABLED, TransportConstants.DEFAULT_SSL_ENABLED);
            this.needClientAuth = acceptor && bool(params, NEED_CLIENT_AUTH, TransportConstants.DEFAULT_NEED_CLIENT_AUTH);
            this.wantClientAuth = acceptor && bool(params, WANT_CLIENT_AUTH, TransportConstants.DEFAULT_WANT_CLIENT_AUTH);
            this.verifyHost = bool(params, VERIFY_HOST, acceptor ? TransportConstants.DEFAULT_ACCEPTOR_VERIFY_HOST
                    : TransportConstants.DEFAULT_CONNECTOR_VERIFY_HOST);
            this.trustAll = !acceptor && bool(params, TRUST_ALL, TransportConstants.DEFAULT_TRUST_ALL);
            this.forceSslParameters = !acceptor && bool(params, FORCE_SSL_PARAMETERS,
                    TransportConstants.DEFAULT_FORCE_SSL_PARAMETERS);
            if (acceptor) {
                bool(params, SSL_AUTO_RELOAD, TransportConstants.DEFAULT_SSL_AUTO_RELOAD); // checked; the broker reads it
            }
            Object timeout = params.get(SSL_HANDSHAKE_TIMEOUT);
            // a connector has no sslHandshakeTimeout (Artemis's has none: Netty's 10 s); its TLS handshake gets the
            // connectTimeout it was given, so a slow fabric's users raise one key for the whole connect
            Object connect = params.get("connectTimeout");
            this.handshakeTimeout = !acceptor ? (connect == null ? CONNECTOR_HANDSHAKE_TIMEOUT
                    : TransportConfig.fromMap(Map.of("connectTimeout", connect)).connectTimeout())
                    : Duration.ofSeconds(timeout == null ? TransportConstants.DEFAULT_SSL_HANDSHAKE_TIMEOUT
                    : TransportConfig.intValue(SSL_HANDSHAKE_TIMEOUT, timeout, 0, MAX_HANDSHAKE_TIMEOUT_SECONDS));
            String provider = string(params, SSL_PROVIDER, TransportConstants.DEFAULT_SSL_PROVIDER);
            if (provider.trim().equalsIgnoreCase(TransportConstants.OPENSSL_PROVIDER)) {
                throw new IllegalArgumentException(SSL_PROVIDER + "=" + provider + " is not supported over RDMA: only "
                        + "the JDK's SSLEngine runs over RDMA frames; remove " + SSL_PROVIDER + " or set it to "
                        + TransportConstants.DEFAULT_SSL_PROVIDER);
            }
            if (!provider.trim().equalsIgnoreCase(TransportConstants.DEFAULT_SSL_PROVIDER)) {
                throw new IllegalArgumentException(SSL_PROVIDER + ": expected " + TransportConstants.DEFAULT_SSL_PROVIDER
                        + ", got '" + provider + "'");
            }
            this.cipherSuitesText = string(params, ENABLED_CIPHER_SUITES, TransportConstants.DEFAULT_ENABLED_CIPHER_SUITES);
            this.cipherSuites = cipherSuitesText == null ? null
                    : SSLSupport.parseCommaSeparatedListIntoArray(cipherSuitesText);
            this.protocolsText = string(params, ENABLED_PROTOCOLS, TransportConstants.DEFAULT_ENABLED_PROTOCOLS);
            this.protocols = protocolsText == null ? null : SSLSupport.parseCommaSeparatedListIntoArray(protocolsText);
            this.sniHost = string(params, SNI_HOST, TransportConstants.DEFAULT_SNIHOST_CONFIG);
            if (sniHost != null) {
                try {
                    if (acceptor) {
                        SNIHostName.createSNIMatcher(sniHost);
                    } else {
                        new SNIHostName(sniHost);
                    }
                } catch (IllegalArgumentException e) { // PatternSyntaxException among them
                    throw new IllegalArgumentException(SNI_HOST + ": '" + sniHost + "' is not a host name"
                            + (acceptor ? " pattern" : "") + ": " + describe(e), e);
                }
            }
            Pair<String, String> keyStore = SSLSupport.getValidProviderAndType(
                    string(params, KEY_STORE_PROVIDER, TransportConstants.DEFAULT_KEYSTORE_PROVIDER),
                    string(params, KEY_STORE_TYPE, TransportConstants.DEFAULT_KEYSTORE_TYPE));
            this.keyStoreProvider = keyStore.getA();
            this.keyStoreType = keyStore.getB();
            this.keyStorePath = string(params, KEY_STORE_PATH, TransportConstants.DEFAULT_KEYSTORE_PATH);
            // decoded only with TLS on, as Netty: <mask-password> adds its keys to every acceptor and connector
            this.keyStorePassword = enabled ? password(params, KEY_STORE_PASSWORD,
                    TransportConstants.DEFAULT_KEYSTORE_PASSWORD) : null;
            this.keyPassword = enabled ? password(params, KEY_PASSWORD, TransportConstants.DEFAULT_KEY_PASSWORD) : null;
            this.keyStoreAlias = string(params, KEY_STORE_ALIAS, TransportConstants.DEFAULT_KEYSTORE_ALIAS);
            Pair<String, String> trustStore = SSLSupport.getValidProviderAndType(
                    string(params, TRUST_STORE_PROVIDER, TransportConstants.DEFAULT_TRUSTSTORE_PROVIDER),
                    string(params, TRUST_STORE_TYPE, TransportConstants.DEFAULT_TRUSTSTORE_TYPE));
            this.trustStoreProvider = trustStore.getA();
            this.trustStoreType = trustStore.getB();
            this.trustStorePath = string(params, TRUST_STORE_PATH, TransportConstants.DEFAULT_TRUSTSTORE_PATH);
            this.trustStorePassword = enabled ? password(params, TRUST_STORE_PASSWORD,
                    TransportConstants.DEFAULT_TRUSTSTORE_PASSWORD) : null;
            this.crlPath = string(params, CRL_PATH, TransportConstants.DEFAULT_CRL_PATH);
            this.passwordCodec = string(params, ActiveMQDefaultConfiguration.getPropPasswordCodec(),
                    TransportConstants.DEFAULT_PASSWORD_CODEC_CLASS);
            this.host = acceptor ? null : RdmaParameters.host(params);
            this.port = acceptor ? -1 : RdmaParameters.port(params);
            if (enabled && acceptor && keyStorePath == null && keyStoreProvider == null) {
                // NettyAcceptor.checkSSLConfiguration
                throw new IllegalArgumentException(SSL_ENABLED + "=true needs " + KEY_STORE_PATH
                        + " (the broker's certificate and key), or a " + KEY_STORE_PROVIDER
                        + " that holds them");
            }
        }

        /**
         * What Artemis's SSLSupport takes; for a connector without forceSSLParameters, the store system properties
         * (org.apache.activemq.ssl.*, then javax.net.ssl.*) first, read now, as NettyConnector reads them when it
         * starts.
         */
        SSLContextConfig contextConfig() {
            SSLContextConfig.Builder builder = SSLContextConfig.builder()
                    .keystoreAlias(keyStoreAlias)
                    .keyPassword(keyPassword)
                    .crlPath(crlPath)
                    .trustAll(trustAll);
            if (side == Side.ACCEPTOR || forceSslParameters) {
                return builder
                        .keystoreProvider(keyStoreProvider).keystoreType(keyStoreType)
                        .keystorePath(keyStorePath).keystorePassword(keyStorePassword)
                        .truststoreProvider(trustStoreProvider).truststoreType(trustStoreType)
                        .truststorePath(trustStorePath).truststorePassword(trustStorePassword)
                        .build();
            }
            String codec = first(System.getProperty(NettyConnector.ACTIVEMQ_SSL_PASSWORD_CODEC_CLASS_PROP_NAME),
                    passwordCodec);
            Pair<String, String> keyStore = SSLSupport.getValidProviderAndType(
                    first(System.getProperty(NettyConnector.ACTIVEMQ_KEYSTORE_PROVIDER_PROP_NAME),
                            System.getProperty(NettyConnector.JAVAX_KEYSTORE_PROVIDER_PROP_NAME), keyStoreProvider),
                    first(System.getProperty(NettyConnector.ACTIVEMQ_KEYSTORE_TYPE_PROP_NAME),
                            System.getProperty(NettyConnector.JAVAX_KEYSTORE_TYPE_PROP_NAME), keyStoreType));
            Pair<String, String> trustStore = SSLSupport.getValidProviderAndType(
                    first(System.getProperty(NettyConnector.ACTIVEMQ_TRUSTSTORE_PROVIDER_PROP_NAME),
                            System.getProperty(NettyConnector.JAVAX_TRUSTSTORE_PROVIDER_PROP_NAME), trustStoreProvider),
                    first(System.getProperty(NettyConnector.ACTIVEMQ_TRUSTSTORE_TYPE_PROP_NAME),
                            System.getProperty(NettyConnector.JAVAX_TRUSTSTORE_TYPE_PROP_NAME), trustStoreType));
            return builder
                    .keystoreProvider(keyStore.getA()).keystoreType(keyStore.getB())
                    .keystorePath(first(System.getProperty(NettyConnector.ACTIVEMQ_KEYSTORE_PATH_PROP_NAME),
                            System.getProperty(NettyConnector.JAVAX_KEYSTORE_PATH_PROP_NAME), keyStorePath))
                    .keystorePassword(systemPassword(KEY_STORE_PASSWORD, keyStorePassword, codec,
                            NettyConnector.ACTIVEMQ_KEYSTORE_PASSWORD_PROP_NAME,
                            NettyConnector.JAVAX_KEYSTORE_PASSWORD_PROP_NAME))
                    .truststoreProvider(trustStore.getA()).truststoreType(trustStore.getB())
                    .truststorePath(first(System.getProperty(NettyConnector.ACTIVEMQ_TRUSTSTORE_PATH_PROP_NAME),
                            System.getProperty(NettyConnector.JAVAX_TRUSTSTORE_PATH_PROP_NAME), trustStorePath))
                    .truststorePassword(systemPassword(TRUST_STORE_PASSWORD, trustStorePassword, codec,
                            NettyConnector.ACTIVEMQ_TRUSTSTORE_PASSWORD_PROP_NAME,
                            NettyConnector.JAVAX_TRUSTSTORE_PASSWORD_PROP_NAME))
                    .build();
        }

        /** A password of a system property, unmasked with the codec (ENC(...) only), else the key's own. */
        private static String systemPassword(String key, String own, String codec, String activemqProperty,
                                             String javaxProperty) {
            String property = System.getProperty(activemqProperty) != null ? activemqProperty
                    : System.getProperty(javaxProperty) != null ? javaxProperty : null;
            if (property == null) {
                return own;
            }
            String value = System.getProperty(property);
            if (value.equals(own)) {
                return own;
            }
            try {
                return PasswordMaskingUtil.resolveMask(value, codec);
            } catch (Exception e) {
                throw new IllegalArgumentException(key + ": the system property " + property
                        + " cannot be decoded with codec " + codec + ": " + describe(e), e);
            }
        }

        @SafeVarargs
        private static <T> T first(T... values) {
            return Stream.of(values).filter(Objects::nonNull).findFirst().orElse(null);
        }

        private static boolean bool(Map<String, ?> params, String key, boolean defaultValue) {
            Object value = params.get(key);
            return value == null ? defaultValue : TransportConfig.booleanValue(key, value);
        }

        private static String string(Map<String, ?> params, String key, String defaultValue) {
            return ConfigurationHelper.getStringProperty(key, defaultValue, params);
        }

        /** As Artemis reads a password: ENC(...), activemq.usemaskedpassword and activemq.passwordcodec apply. */
        private static String password(Map<String, ?> params, String key, String defaultValue) {
            try {
                return ConfigurationHelper.getPasswordProperty(key, defaultValue, params,
                        ActiveMQDefaultConfiguration.getPropMaskPassword(),
                        ActiveMQDefaultConfiguration.getPropPasswordCodec());
            } catch (RuntimeException e) {
                throw new IllegalArgumentException(key + ": cannot be decoded (masked with ENC(...) or "
                        + ActiveMQDefaultConfiguration.getPropMaskPassword() + "=true, codec "
                        + params.get(ActiveMQDefaultConfiguration.getPropPasswordCodec()) + "): " + describe(e), e);
            }
        }
    }
}
