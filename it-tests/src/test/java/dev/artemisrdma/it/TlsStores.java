package dev.artemisrdma.it;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The project's TLS test stores ({@code artemis-rdma-connector/src/test/resources/tls}, made by {@code make-stores}
 * there: PKCS12, password {@value #PASSWORD}; a test CA signs broker.p12 and client.p12, trust.p12 holds it) and the
 * keys of Artemis's TLS settings that use them, the same on an {@code rdma} and a Netty {@code tcp} endpoint. The lab
 * guests and both hosts of the two-host lab see the checkout at the same path, so one path serves every process.
 */
public final class TlsStores {

    public static final String PASSWORD = "secureexample";

    private TlsStores() {
    }

    /** The store {@code NAME.p12} of the test set, by absolute path; found above the working directory. */
    public static String path(String name) {
        Path dir = Path.of(System.getProperty("user.dir")).toAbsolutePath();
        while (dir != null) {
            Path p = dir.resolve("artemis-rdma-connector/src/test/resources/tls").resolve(name + ".p12");
            if (Files.isReadable(p)) {
                return p.toString();
            }
            dir = dir.getParent();
        }
        throw new IllegalStateException("TLS test store " + name + ".p12 not found above " + System.getProperty(
                "user.dir") + " (artemis-rdma-connector/src/test/resources/tls, see make-stores there)");
    }

    /**
     * An acceptor's TLS keys: sslEnabled, the key store {@code key}, trust.p12 as its trust store and
     * {@code needClientAuth}.
     */
    public static Map<String, String> acceptor(String key, boolean needClientAuth) {
        Map<String, String> p = stores(key, "trust");
        p.put("needClientAuth", Boolean.toString(needClientAuth));
        return p;
    }

    /** A connector's TLS keys: sslEnabled, trust.p12 as its trust store and {@code key} (null: none) as its key store. */
    public static Map<String, String> connector(String key) {
        return stores(key, "trust");
    }

    /** {@link #connector}'s keys as a URL query's tail: {@code &sslEnabled=true&trustStorePath=...}. */
    public static String query(String key) {
        StringBuilder q = new StringBuilder();
        connector(key).forEach((k, v) -> q.append('&').append(k).append('=').append(v));
        return q.toString();
    }

    private static Map<String, String> stores(String key, String trust) {
        Map<String, String> p = new LinkedHashMap<>();
        p.put("sslEnabled", "true");
        if (key != null) {
            p.put("keyStorePath", path(key));
            p.put("keyStorePassword", PASSWORD);
            p.put("keyStoreType", "PKCS12");
        }
        p.put("trustStorePath", path(trust));
        p.put("trustStorePassword", PASSWORD);
        p.put("trustStoreType", "PKCS12");
        return p;
    }
}
