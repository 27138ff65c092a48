package dev.artemisrdma.artemis;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.MalformedURLException;
import java.net.URL;
import java.net.URLClassLoader;
import java.util.Arrays;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * A plain RDMA acceptor or connector does not need Netty's SOCKS codec on the class path: reading its (absent) TLS
 * keys leaves Artemis's Netty {@code TransportConstants} uninitialised, whose class initialisation needs
 * {@code io.netty.handler.codec.socksx}. The compatibility lab's Artemis 2.43.0 broker, started on a class path
 * without that codec, failed its plain RDMA acceptor with {@code NoClassDefFoundError: SocksVersion} when every
 * endpoint read the TLS keys' defaults from there. Proven in a class loader of this test's class path that hides the
 * codec: the plain endpoint's TLS is null, while an endpoint that names a TLS key still reaches TransportConstants
 * there (so the hiding is real).
 */
class PlainEndpointWithoutSocksCodecTest {

    @Test
    void aPlainEndpointReadsNoTlsDefaultsFromNettysTransportConstants() throws Exception {
        try (URLClassLoader withoutSocks = new WithoutSocks(classPath())) {
            Class<?> engines = Class.forName(TlsEngines.class.getName(), true, withoutSocks);
            Method acceptor = engines.getDeclaredMethod("acceptor", Map.class);
            Method connector = engines.getDeclaredMethod("connector", Map.class);
            acceptor.setAccessible(true);
            connector.setAccessible(true);
            assertNull(acceptor.invoke(null, Map.of("host", "10.0.0.1", "port", "61700", "receiveSlots", "64")));
            assertNull(connector.invoke(null, Map.of("host", "10.0.0.1", "port", "61700")));
            InvocationTargetException named = assertThrows(InvocationTargetException.class,
                    () -> acceptor.invoke(null, Map.of("host", "10.0.0.1", "sslEnabled", "false")));
            assertTrue(named.getCause() instanceof NoClassDefFoundError, "the codec was not hidden: " + named.getCause());
        }
    }

    private static URL[] classPath() {
        String path = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        return Arrays.stream(path.split(File.pathSeparator)).map(p -> {
            try {
                return new File(p).toURI().toURL();
            } catch (MalformedURLException e) {
                throw new IllegalStateException(p, e);
            }
        }).toArray(URL[]::new);
    }

    /** This test's class path, its own copies of every class, without Netty's SOCKS codec. */
    private static final class WithoutSocks extends URLClassLoader {
        WithoutSocks(URL[] urls) {
            super(urls, ClassLoader.getPlatformClassLoader());
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            if (name.startsWith("io.netty.handler.codec.socksx.")) {
                throw new ClassNotFoundException(name + " (hidden by this test)");
            }
            return super.loadClass(name, resolve);
        }
    }
}
