package dev.artemisrdma.it.bench;

import dev.artemisrdma.it.TlsStores;
import dev.artemisrdma.it.artemis.LabBroker;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.Map;

/**
 * artemis-bench's broker in a JVM of its own: {@code config/broker.xml} (its RDMA acceptor) plus a Netty TCP acceptor
 * on the same host, persistence on. A separate JVM, so that the broker's transport (its completion loops) is not the
 * clients' transport too, as it would be in one JVM (one transport per JVM and settings), and so that each side's
 * CPU can be told apart. Commands on stdin: {@code mark} (answers {@code MARKED}) and {@code usage} (answers one
 * {@code USAGE} line: the process's CPU nanoseconds and the JIT's compile milliseconds since the mark, then a tab-separated {@code nanos name} per
 * thread group, see {@link ThreadCpu}); {@code exit} or the end of stdin stops the broker and the JVM.
 *
 * <p>Arguments: host rdmaPort tcpPort [rdmaParams: {@code key=value;key=value}, added to the RDMA acceptor's]
 * [{@code tls:RDMA_TLS_PORT:TCP_TLS_PORT}: a TLS acceptor of each transport beside the plain ones, both with the
 * project's test stores ({@link TlsStores#acceptor}, needClientAuth), for tls-bench]. Command {@code sessions} answers
 * one {@code SESSIONS} line: the broker's TLS connections by transport, protocol and cipher suite.
 */
public final class BenchBrokerMain {

    private BenchBrokerMain() {
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> rdmaParams = new java.util.LinkedHashMap<>();
        for (String kv : (args.length > 3 ? args[3] : "").split("[;&]")) {
            if (!kv.isBlank()) {
                int eq = kv.indexOf('=');
                if (eq < 1) {
                    throw new IllegalArgumentException("ACCEPTOR_PARAMS takes key=value;key=value, got '" + kv + "'");
                }
                rdmaParams.put(kv.substring(0, eq).trim(), kv.substring(eq + 1).trim());
            }
        }
        Map<String, Map<String, String>> rdmaTls = new java.util.HashMap<>();
        Map<String, Map<String, String>> tcpTls = new java.util.HashMap<>();
        if (args.length > 4 && args[4].startsWith("tls:")) {
            String[] ports = args[4].split(":");
            rdmaTls.put("rdma-tls", tlsAcceptor(ports[1]));
            tcpTls.put("tcp-tls", tlsAcceptor(ports[2]));
        }
        try (LabBroker broker = LabBroker.start(args[0], Integer.parseInt(args[1]),
                Files.createTempDirectory("bench-broker"), true, Integer.parseInt(args[2]), rdmaParams, rdmaTls,
                tcpTls)) {
            System.out.println("READY pid=" + ProcessHandle.current().pid());
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            ThreadCpu.Snapshot mark = ThreadCpu.snapshot();
            String line;
            while ((line = in.readLine()) != null && !line.equals("exit")) {
                if (line.equals("mark")) {
                    mark = ThreadCpu.snapshot();
                    System.out.println("MARKED");
                } else if (line.equals("sessions")) {
                    System.out.println("SESSIONS " + dev.artemisrdma.artemis.LinkReport.tlsSessions(broker.server()));
                } else if (line.equals("usage")) {
                    System.out.println(format(ThreadCpu.snapshot().since(mark)));
                } else {
                    System.out.println("FAILED unknown command '" + line + "'");
                }
                System.out.flush();
            }
        }
        System.exit(0);
    }

    /** A TLS acceptor's parameters at {@code port}: the test stores, a client certificate needed. */
    static Map<String, String> tlsAcceptor(String port) {
        Map<String, String> p = new java.util.LinkedHashMap<>(TlsStores.acceptor("broker", true));
        p.put("port", port);
        return p;
    }

    static String format(ThreadCpu.Usage usage) {
        StringBuilder b = new StringBuilder("USAGE ").append(usage.processNanos()).append(' ')
                .append(usage.jitMillis());
        for (Map.Entry<String, Long> e : usage.byGroup().entrySet()) {
            b.append('\t').append(e.getValue()).append('/').append(usage.kernelByGroup().getOrDefault(e.getKey(), 0L))
                    .append(' ').append(e.getKey().replace('\t', ' '));
        }
        return b.toString();
    }

    /** The inverse of {@link #format}; each group's name gets {@code prefix}. */
    static ThreadCpu.Usage parse(String line, String prefix) {
        String[] fields = line.split("\t");
        String[] head = fields[0].split(" ");
        long process = Long.parseLong(head[1]);
        long jit = Long.parseLong(head[2]);
        Map<String, Long> byGroup = new java.util.HashMap<>();
        Map<String, Long> kernel = new java.util.HashMap<>();
        for (int i = 1; i < fields.length; i++) {
            int space = fields[i].indexOf(' ');
            String[] nanos = fields[i].substring(0, space).split("/");
            String group = prefix + fields[i].substring(space + 1);
            byGroup.put(group, Long.parseLong(nanos[0]));
            kernel.put(group, Long.parseLong(nanos[1]));
        }
        return new ThreadCpu.Usage(byGroup, kernel, process, jit);
    }
}
