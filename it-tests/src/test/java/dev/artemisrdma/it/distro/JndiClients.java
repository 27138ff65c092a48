package dev.artemisrdma.it.distro;

import dev.artemisrdma.it.artemis.LabBroker;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.util.Properties;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** JMS clients configured by the project's {@code config/jndi.properties}, as an unchanged application is. */
public final class JndiClients {

    public static final String FACTORY = "connectionFactory.ConnectionFactory";
    private static final Pattern RDMA_HOST = Pattern.compile("^(rdma://)([^:/?]+)(:)");

    private JndiClients() {
    }

    /**
     * config/jndi.properties as it is, except that when its connection factory names another host than {@code host}
     * (config names the lab's 10.77.0.1; a lab with other addresses differs), the host is rewritten, and
     * {@code out} is told so.
     */
    public static Properties load(String host, Consumer<String> out) throws IOException {
        Properties jndi = new Properties();
        try (InputStream in = Files.newInputStream(LabBroker.configDir().resolve("jndi.properties"))) {
            jndi.load(in);
        }
        String url = jndi.getProperty(FACTORY);
        Matcher m = url == null ? null : RDMA_HOST.matcher(url);
        if (m == null || !m.find()) {
            throw new IllegalStateException("config/jndi.properties: " + FACTORY + " is not an rdma://HOST:PORT URL: "
                    + url);
        }
        if (!m.group(2).equals(host)) {
            jndi.setProperty(FACTORY, m.replaceFirst(m.group(1) + Matcher.quoteReplacement(host) + m.group(3)));
            out.accept("config/jndi.properties names " + m.group(2) + "; rewritten to the lab's " + host + ": "
                    + jndi.getProperty(FACTORY));
        }
        return jndi;
    }
}
