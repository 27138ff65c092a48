package dev.artemisrdma.it.jpms;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.Lab;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What a modular application can do with the connector, proven by launching one: the connector jar, JNA, slf4j-api
 * and the Jakarta Messaging API on the module path, Artemis on the class path. The connector is the automatic module
 * {@code dev.artemisrdma.connector}; the application module requires it and reaches Artemis only through the JMS and
 * JNDI APIs. Outside the lab (no RDMA device) the connection attempt must fail in the verbs layer for want of a
 * device; in the lab it must get past opening the fabric (nobody listens on the port, so it is refused).
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class ModularLaunchTest {

    private static final boolean RDMA = hasRdmaDevice();
    /**
     * What a modular launch must add to the boot layer: slf4j-api (an explicit module nothing requires by name: the
     * connector, an automatic module, cannot declare it) and the JDK modules Artemis on the class path uses (with a
     * module as main class, only the main module's graph is resolved, not the java.se default).
     */
    static final String ADD_MODULES = System.getProperty("jpms.addModules",
            "org.slf4j,java.sql");

    @TempDir
    Path work;

    @Test
    void modularApplicationUsesTheConnectorAsAutomaticModuleWithArtemisOnTheClassPath() throws Exception {
        Libraries libs = Libraries.find();
        Path app = compileApp(libs);
        try (JavaProcess process = JavaProcess.java("modular-app")
                .jvm("--module-path", join(libs.modulePath) + File.pathSeparator + app, "--add-modules", ADD_MODULES)
                .classPath(join(libs.classPath)).property("org.slf4j.simpleLogger.log.dev.artemisrdma", "debug")
                .module("rdma.app/app.Main").keepOutput().start(Lab.addr1(), Integer.toString(Lab.freshPort()))) {
            boolean ended = process.awaitExit(120);
            String out = process.output();
            assertTrue(ended, out);
            assertEquals(0, process.exitValue(), out);
            assertApplicationRan(out);
        }
    }

    private static void assertApplicationRan(String out) {
        assertTrue(out.contains("connector module: dev.artemisrdma.connector automatic=true"), out);
        assertTrue(out.contains("jna module: com.sun.jna"), out);
        assertTrue(out.matches("(?s).*connection factory: org\\.apache\\.activemq\\.artemis\\.jms\\.client\\.\\w+ "
                + "named=false.*"), "Artemis runs from the class path (unnamed module): " + out);
        assertTrue(out.contains("connect: failed"), out);
        if (RDMA) {
            assertFalse(out.contains("cannot open the RDMA transport"), out);
            assertTrue(out.contains("RDMA connector: cannot connect to"), "the fabric opened: " + out);
        } else {
            assertTrue(out.contains("no RDMA device found"), "the verbs layer ran from the module path: " + out);
        }
    }

    /** Why Artemis stays on the class path: its jars split packages, and a boot layer with them does not resolve. */
    @Test
    void artemisJarsCannotBeNamedModules() throws Exception {
        Libraries libs = Libraries.find();
        List<String> artemis = libs.classPath.stream()
                .filter(p -> p.getFileName().toString().matches("artemis-(commons|core-client)-.*\\.jar"))
                .map(Path::toString).toList();
        assertEquals(2, artemis.size(), libs.classPath.toString());
        try (JavaProcess process = JavaProcess.java("list-modules").classPath(null)
                .jvm("--module-path", String.join(File.pathSeparator, artemis), "--add-modules", "ALL-MODULE-PATH",
                        "--list-modules").keepOutput().start()) {
            boolean ended = process.awaitExit(60);
            String out = process.output();
            assertTrue(ended, out);
            assertNotEquals(0, process.exitValue(), out);
            assertTrue(out.contains("ResolutionException") && out.contains("org.apache.activemq.artemis."), out);
        }
    }

    private Path compileApp(Libraries libs) throws Exception {
        Path src = work.resolve("src/rdma.app");
        Files.createDirectories(src.resolve("app"));
        Files.writeString(src.resolve("module-info.java"), """
                module rdma.app {
                    requires dev.artemisrdma.connector;
                    requires jakarta.messaging;
                    requires java.naming;
                }
                """);
        Files.writeString(src.resolve("app/Main.java"), """
                package app;

                import java.util.Hashtable;
                import javax.naming.Context;
                import javax.naming.InitialContext;
                import jakarta.jms.ConnectionFactory;
                import dev.artemisrdma.artemis.RdmaConnectionFactories;

                public class Main {
                    public static void main(String[] args) throws Exception {
                        Module connector = RdmaConnectionFactories.class.getModule();
                        System.out.println("connector module: " + connector.getName() + " automatic="
                                + connector.getDescriptor().isAutomatic());
                        System.out.println("jna module: " + Class.forName("com.sun.jna.Native").getModule().getName());
                        String url = "rdma://" + args[0] + ":" + args[1];
                        System.out.println("rdma url: " + RdmaConnectionFactories.isRdmaUrl(url));
                        Hashtable<String, Object> env = new Hashtable<>();
                        env.put(Context.INITIAL_CONTEXT_FACTORY, "dev.artemisrdma.artemis.RdmaInitialContextFactory");
                        env.put("connectionFactory.cf", url + "?reconnectAttempts=0&initialConnectAttempts=1");
                        ConnectionFactory cf = (ConnectionFactory) new InitialContext(env).lookup("cf");
                        System.out.println("connection factory: " + cf.getClass().getName() + " named="
                                + cf.getClass().getModule().isNamed());
                        try (var connection = cf.createConnection()) {
                            System.out.println("connect: succeeded (unexpected: nothing listens there)");
                        } catch (jakarta.jms.JMSException e) {
                            System.out.println("connect: failed: " + e);
                        }
                    }
                }
                """);
        Path out = work.resolve("app");
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        int rc = javac.run(null, null, null, "-d", out.toString(), "--module-path", join(libs.modulePath),
                src.resolve("module-info.java").toString(), src.resolve("app/Main.java").toString());
        assertEquals(0, rc, "the application module compiles against the connector's automatic module");
        return out;
    }

    /** Module path: target/jpms-libs (connector, JNA, slf4j-api) + jakarta.jms-api; class path: the rest of Artemis. */
    private record Libraries(List<Path> modulePath, List<Path> classPath) {
        static Libraries find() throws Exception {
            Path testClasses = Path.of(ModularLaunchTest.class.getProtectionDomain().getCodeSource().getLocation()
                    .toURI());
            Path dir = testClasses.getParent().resolve("jpms-libs");
            List<Path> modulePath = new ArrayList<>();
            try (var jars = Files.list(dir)) {
                jars.filter(p -> p.toString().endsWith(".jar")).sorted().forEach(modulePath::add);
            }
            assertEquals(3, modulePath.size(), "connector, jna, slf4j-api in " + dir);
            List<Path> classPath = new ArrayList<>();
            for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
                Path p = Path.of(entry);
                String name = p.getFileName().toString();
                if (name.startsWith("jakarta.jms-api")) {
                    modulePath.add(p);
                } else if (name.startsWith("artemis-") && !name.startsWith("artemis-rdma")
                        || name.startsWith("netty-") || name.startsWith("commons-") || name.startsWith("jgroups")
                        || name.startsWith("pem-keystore") || name.startsWith("asn-one")
                        || name.startsWith("slf4j-simple")) {
                    classPath.add(p);
                }
            }
            return new Libraries(modulePath, classPath);
        }
    }

    private static String join(List<Path> paths) {
        return String.join(File.pathSeparator, paths.stream().map(Path::toString).toList());
    }

    private static boolean hasRdmaDevice() {
        String[] devices = new File("/sys/class/infiniband").list();
        return devices != null && devices.length > 0;
    }
}
