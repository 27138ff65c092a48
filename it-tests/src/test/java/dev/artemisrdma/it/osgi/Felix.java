package dev.artemisrdma.it.osgi;

import java.io.IOException;
import java.io.OutputStream;
import java.lang.reflect.Method;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Dictionary;
import java.util.HashMap;
import java.util.Hashtable;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.TreeSet;
import java.util.jar.Attributes;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import java.util.stream.Stream;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.BundleException;
import org.osgi.framework.Constants;
import org.osgi.framework.FrameworkEvent;
import org.osgi.framework.ServiceReference;
import org.osgi.framework.launch.Framework;
import org.osgi.framework.launch.FrameworkFactory;
import org.osgi.framework.wiring.FrameworkWiring;

/**
 * Apache Felix inside the test JVM with artemis-server-osgi 2.43.0 and its dependencies, JNA and our bundle, from
 * it-tests/target/felix-bundles (filled by Maven, see it-tests/pom.xml). Logging: slf4j from the test class path,
 * exported by the system bundle. Nothing of Artemis is on the test class path inside the framework: only
 * {@code org.osgi.*}, {@code java.*} and slf4j cross the boundary, so framework objects are used reflectively.
 */
final class Felix implements AutoCloseable {

    static final String BROKER_BUNDLE = "org.apache.activemq.artemis-server-osgi";
    static final String OUR_BUNDLE = "dev.artemisrdma.connector";
    static final String OUR_FRAGMENT = "dev.artemisrdma.connector.host";
    static final String SERVER_CLASS = "org.apache.activemq.artemis.core.server.ActiveMQServer";
    private static final String SLF4J = "2.0.20";

    private final Framework framework;
    private final Path work;

    private Felix(Framework framework, Path work) {
        this.framework = framework;
        this.work = work;
    }

    /** it-tests/target/felix-bundles, next to the test classes this class was loaded from. */
    static Path bundleDir() {
        try {
            Path testClasses = Path.of(Felix.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            Path dir = testClasses.getParent().resolve("felix-bundles");
            if (!Files.isDirectory(dir)) {
                throw new IllegalStateException(dir + " is missing: build it-tests with Maven (its "
                        + "generate-test-resources phase copies the bundles there)");
            }
            return dir;
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Every jar of {@link #bundleDir()}: with or without our host fragment. jgroups is wrapped on the way. */
    static List<Path> bundles(Path work, boolean withHostFragment) throws IOException {
        List<Path> jars = new ArrayList<>();
        try (Stream<Path> files = Files.list(bundleDir())) {
            for (Path jar : files.filter(p -> p.toString().endsWith(".jar")).sorted().toList()) {
                String name = jar.getFileName().toString();
                if (name.startsWith("wrap-")) {
                    jars.add(wrap(jar, work.resolve(name.substring("wrap-".length()))));
                } else if (!name.endsWith("-host.jar") || withHostFragment) {
                    jars.add(jar);
                }
            }
        }
        return jars;
    }

    /**
     * Starts a framework (storage under {@code work}), installs {@code jars} and starts each non-fragment. The thread
     * context class loader is the platform loader meanwhile, so that threads the bundles create (Config Admin's
     * dispatcher, which starts the broker) do not see this JVM's class path.
     */
    static Felix start(Path work, List<Path> jars) throws Exception {
        Map<String, String> props = new HashMap<>();
        props.put(Constants.FRAMEWORK_STORAGE, work.resolve("felix-cache").toString());
        props.put(Constants.FRAMEWORK_STORAGE_CLEAN, Constants.FRAMEWORK_STORAGE_CLEAN_ONFIRSTINIT);
        props.put(Constants.FRAMEWORK_SYSTEMPACKAGES_EXTRA, String.join(",",
                "org.slf4j;version=\"" + SLF4J + "\"", "org.slf4j.spi;version=\"" + SLF4J + "\"",
                "org.slf4j.helpers;version=\"" + SLF4J + "\"", "org.slf4j.event;version=\"" + SLF4J + "\"",
                "org.slf4j;version=\"1.7.36\"", "org.slf4j.helpers;version=\"1.7.36\""));
        FrameworkFactory factory = ServiceLoader.load(FrameworkFactory.class).findFirst().orElseThrow();
        Framework framework = factory.newFramework(props);
        Felix felix = new Felix(framework, work);
        withPlatformContextLoader(() -> {
            framework.init();
            framework.start();
            BundleContext context = framework.getBundleContext();
            List<Bundle> installed = new ArrayList<>();
            for (Path jar : jars) {
                installed.add(context.installBundle(jar.toUri().toString()));
            }
            for (Bundle bundle : installed) {
                if (bundle.getHeaders().get(Constants.FRAGMENT_HOST) == null) {
                    bundle.start();
                }
            }
            return null;
        });
        return felix;
    }

    BundleContext context() {
        return framework.getBundleContext();
    }

    Bundle bundle(String symbolicName) {
        for (Bundle bundle : context().getBundles()) {
            if (symbolicName.equals(bundle.getSymbolicName())) {
                return bundle;
            }
        }
        return null;
    }

    /** Bundle symbolic names that did not reach ACTIVE (fragments: RESOLVED), for assertion messages. */
    List<String> notActive() {
        List<String> out = new ArrayList<>();
        for (Bundle bundle : context().getBundles()) {
            boolean fragment = bundle.getHeaders().get(Constants.FRAGMENT_HOST) != null;
            int want = fragment ? Bundle.RESOLVED : Bundle.ACTIVE;
            if (bundle.getState() != want) {
                out.add(bundle.getSymbolicName() + " state " + bundle.getState());
            }
        }
        return out;
    }

    /** Configures Artemis's OsgiBroker through Config Admin (pid org.apache.activemq.artemis). */
    void configureBroker(Path brokerXml, String name) throws Exception {
        ServiceReference<?> ref = context().getAllServiceReferences("org.osgi.service.cm.ConfigurationAdmin", null)[0];
        if (ref == null) {
            throw new IllegalStateException("no ConfigurationAdmin service");
        }
        Object admin = context().getService(ref);
        Object configuration = call(admin, "getConfiguration", "org.apache.activemq.artemis", null);
        Dictionary<String, Object> properties = new Hashtable<>();
        properties.put("config", brokerXml.toUri().toString());
        properties.put("name", name);
        properties.put("domain", "activemq");
        withPlatformContextLoader(() -> call(configuration, "update", properties));
    }

    /** Deletes the broker configuration (OsgiBroker deactivates). */
    void deleteBrokerConfiguration() throws Exception {
        ServiceReference<?> ref = context().getAllServiceReferences("org.osgi.service.cm.ConfigurationAdmin", null)[0];
        Object admin = context().getService(ref);
        call(call(admin, "getConfiguration", "org.apache.activemq.artemis", null), "delete");
    }

    /** The ActiveMQServer service object, waiting up to {@code timeout} for it. */
    Object awaitBroker(Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            Object server = brokerOrNull();
            if (server != null) {
                return server;
            }
            Thread.sleep(100);
        }
        throw new AssertionError("no " + SERVER_CLASS + " service after " + timeout + "; bundles not active: "
                + notActive());
    }

    /** The broker service; all references, since the system bundle does not see Artemis's classes. */
    Object brokerOrNull() {
        try {
            ServiceReference<?>[] refs = context().getAllServiceReferences(SERVER_CLASS, null);
            return refs == null ? null : context().getService(refs[0]);
        } catch (org.osgi.framework.InvalidSyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Refreshes {@code bundles} (and what depends on them) and waits for the refresh to finish. */
    void refresh(Bundle... bundles) throws Exception {
        FrameworkWiring wiring = framework.adapt(FrameworkWiring.class);
        java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
        withPlatformContextLoader(() -> {
            wiring.refreshBundles(bundles.length == 0 ? null : List.of(bundles), event -> {
                if (event.getType() == FrameworkEvent.PACKAGES_REFRESHED) {
                    done.countDown();
                }
            });
            return null;
        });
        if (!done.await(120, java.util.concurrent.TimeUnit.SECONDS)) {
            throw new AssertionError("refresh did not finish in 120 s");
        }
    }

    /** Stops the broker (OsgiBroker would leave it running), then the framework. */
    @Override
    public void close() throws Exception {
        try {
            Object server = brokerOrNull();
            if (server != null && (Boolean) call(server, "isStarted")) {
                call(server, "stop");
            }
        } finally {
            framework.stop();
            FrameworkEvent event = framework.waitForStop(60_000);
            if (event.getType() == FrameworkEvent.WAIT_TIMEDOUT) {
                throw new AssertionError("the framework did not stop in 60 s");
            }
        }
    }

    Path work() {
        return work;
    }

    /** Calls a public method by name and argument count (framework objects are not of our class loader). */
    static Object call(Object target, String method, Object... args) throws Exception {
        for (Method m : publicMethods(target.getClass())) {
            if (m.getName().equals(method) && m.getParameterCount() == args.length && accepts(m, args)) {
                m.setAccessible(true);
                try {
                    return m.invoke(target, args);
                } catch (java.lang.reflect.InvocationTargetException e) {
                    if (e.getCause() instanceof Exception cause) {
                        throw cause;
                    }
                    throw e;
                }
            }
        }
        throw new NoSuchMethodException(target.getClass().getName() + "." + method + "/" + args.length);
    }

    private static List<Method> publicMethods(Class<?> type) {
        List<Method> methods = new ArrayList<>();
        for (Class<?> c = type; c != null; c = c.getSuperclass()) {
            for (Class<?> i : c.getInterfaces()) {
                methods.addAll(List.of(i.getMethods()));
            }
        }
        methods.addAll(List.of(type.getMethods()));
        return methods;
    }

    private static boolean accepts(Method m, Object[] args) {
        Class<?>[] types = m.getParameterTypes();
        for (int i = 0; i < args.length; i++) {
            if (args[i] != null && !types[i].isPrimitive() && !types[i].isInstance(args[i])) {
                return false;
            }
        }
        return true;
    }

    interface Action<T> {
        T run() throws Exception;
    }

    static <T> T withPlatformContextLoader(Action<T> action) throws Exception {
        Thread thread = Thread.currentThread();
        ClassLoader previous = thread.getContextClassLoader();
        thread.setContextClassLoader(ClassLoader.getPlatformClassLoader());
        try {
            return action.run();
        } finally {
            thread.setContextClassLoader(previous);
        }
    }

    /**
     * jgroups is not a bundle, and artemis-server-osgi imports org.jgroups: export every package of the jar, import
     * nothing statically (Karaf does the same with wrap:).
     */
    private static Path wrap(Path jar, Path out) throws IOException {
        TreeSet<String> packages = new TreeSet<>();
        Manifest manifest = new Manifest();
        Attributes main = manifest.getMainAttributes();
        main.put(Attributes.Name.MANIFEST_VERSION, "1.0");
        try (JarFile in = new JarFile(jar.toFile())) {
            in.stream().map(JarEntry::getName).filter(n -> n.endsWith(".class") && n.indexOf('/') > 0)
                    .filter(n -> !n.startsWith("META-INF/"))
                    .forEach(n -> packages.add(n.substring(0, n.lastIndexOf('/')).replace('/', '.')));
            String version = jar.getFileName().toString().replaceAll(".*-(\\d+\\.\\d+\\.\\d+).*", "$1");
            main.putValue(Constants.BUNDLE_MANIFESTVERSION, "2");
            main.putValue(Constants.BUNDLE_SYMBOLICNAME, "org.jgroups");
            main.putValue(Constants.BUNDLE_VERSION, version);
            main.putValue(Constants.EXPORT_PACKAGE, String.join(",",
                    packages.stream().map(p -> p + ";version=\"" + version + "\"").toList()));
            main.putValue(Constants.DYNAMICIMPORT_PACKAGE, "*");
            try (OutputStream file = Files.newOutputStream(out);
                 JarOutputStream target = new JarOutputStream(file, manifest)) {
                var entries = in.entries();
                while (entries.hasMoreElements()) {
                    JarEntry entry = entries.nextElement();
                    if (entry.getName().equals("META-INF/MANIFEST.MF") || entry.isDirectory()) {
                        continue;
                    }
                    target.putNextEntry(new JarEntry(entry.getName()));
                    in.getInputStream(entry).transferTo(target);
                    target.closeEntry();
                }
            }
        }
        return out;
    }

    static void uninstall(Bundle bundle) throws BundleException {
        bundle.uninstall();
    }
}
