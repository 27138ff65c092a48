package dev.artemisrdma.it.distro;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * README's "Broker" instructions, read from README.md itself: the jars to copy into an instance's {@code lib/} and
 * the lines to add to its {@code broker.xml}. Whatever installs the connector into the distribution (the lab test,
 * the demo) applies exactly these, so README cannot drift from what is tested.
 *
 * @param jars         the jar file names README names, with {@code VERSION} still in them
 * @param acceptorLine the {@code <acceptor>} line of README's broker.xml excerpt
 * @param pluginBlock  the {@code <broker-plugins>} block of that excerpt, as README indents it
 * @param section      the whole "Broker" section, for assertions on what else it says
 */
public record ReadmeInstall(List<String> jars, String acceptorLine, String pluginBlock, String section) {

    private static final Pattern JAR = Pattern.compile("`([A-Za-z0-9_.-]+\\.jar)`");
    private static final Pattern ACCEPTOR_HOST = Pattern.compile("(tcp://)([^:/?]+)(:)");

    public static ReadmeInstall read(Path readme) throws IOException {
        String text = Files.readString(readme);
        String section = section(text, "### Broker", readme);
        List<String> jars = new ArrayList<>();
        Matcher m = JAR.matcher(section);
        while (m.find()) {
            if (!jars.contains(m.group(1))) {
                jars.add(m.group(1));
            }
        }
        List<String> xml = xmlBlock(section, readme);
        String acceptor = xml.stream().filter(l -> l.contains("<acceptor ")).map(String::strip).findFirst()
                .orElseThrow(() -> new IllegalStateException(readme + ": the broker.xml excerpt under '### Broker' "
                        + "has no <acceptor> line"));
        int from = indexOf(xml, "<broker-plugins>", readme);
        int to = indexOf(xml, "</broker-plugins>", readme);
        if (jars.isEmpty()) {
            throw new IllegalStateException(readme + ": '### Broker' names no jar (`name.jar`) to copy into lib/");
        }
        return new ReadmeInstall(List.copyOf(jars), acceptor, String.join("\n", xml.subList(from, to + 1)), section);
    }

    /** README's jars into the instance's lib/, as the distribution's build names them. */
    public void installJars(ArtemisInstance instance, ArtemisDistribution distribution) throws IOException {
        instance.installJars(distribution.jarDir(), jarsFor(distribution.connectorVersion()));
    }

    /** README's jars into lib/ and its broker.xml lines into etc/broker.xml, the acceptor bound to {@code host}. */
    public void installWithBrokerXml(ArtemisInstance instance, ArtemisDistribution distribution, String host)
            throws IOException {
        installJars(instance, distribution);
        instance.addToBrokerXml(acceptorLineOn(host), pluginBlock);
    }

    /** The jar names with README's {@code VERSION} placeholder replaced by the connector's version. */
    public List<String> jarsFor(String connectorVersion) {
        return jars.stream().map(j -> j.replace("VERSION", connectorVersion)).toList();
    }

    /** README's acceptor line with its example host replaced by {@code host}. */
    public String acceptorLineOn(String host) {
        Matcher m = ACCEPTOR_HOST.matcher(acceptorLine);
        if (!m.find()) {
            throw new IllegalStateException("README's acceptor line has no tcp://HOST:PORT: " + acceptorLine);
        }
        return m.replaceFirst(m.group(1) + Matcher.quoteReplacement(host) + m.group(3));
    }

    /** The host README's acceptor line names (its example address). */
    public String acceptorHost() {
        Matcher m = ACCEPTOR_HOST.matcher(acceptorLine);
        return m.find() ? m.group(2) : "";
    }

    private static String section(String text, String heading, Path readme) {
        int start = text.indexOf("\n" + heading + "\n");
        if (start < 0) {
            throw new IllegalStateException(readme + " has no '" + heading + "' section");
        }
        int end = text.indexOf("\n#", start + heading.length() + 2);
        return text.substring(start + 1, end < 0 ? text.length() : end);
    }

    private static List<String> xmlBlock(String section, Path readme) {
        int start = section.indexOf("```xml\n");
        int end = start < 0 ? -1 : section.indexOf("\n```", start + 7);
        if (end < 0) {
            throw new IllegalStateException(readme + ": '### Broker' has no ```xml excerpt of broker.xml");
        }
        return List.of(section.substring(start + 7, end).split("\n"));
    }

    private static int indexOf(List<String> lines, String tag, Path readme) {
        for (int i = 0; i < lines.size(); i++) {
            if (lines.get(i).strip().equals(tag)) {
                return i;
            }
        }
        throw new IllegalStateException(readme + ": the broker.xml excerpt under '### Broker' has no " + tag + " line");
    }
}
