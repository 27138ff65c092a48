package dev.artemisrdma.it.hosts;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Runs processes on host B of the two-host lab for tests that run on host A ({@code rdma-lab run --hosts 2 --on-b
 * 'java ... HostAgent PORT'}): it listens on B's management address, and each connection starts one process and
 * relays its stdin, output, signals and exit code ({@link AgentProtocol}). One thread per connection owns its
 * process; a second one pumps the output. A connection that drops kills its process (and the process's children),
 * so nothing a test started outlives it.
 *
 * <p>Arguments: the port. The address is {@code RDMA_LAB_MGMT_B} (the management link, which the wire's faults and
 * flaps never touch); outside the lab, the loopback address.
 */
public final class HostAgent {

    public static final String READY = "HOST AGENT READY";

    private HostAgent() {
    }

    public static void main(String[] args) throws IOException {
        int port = Integer.parseInt(args[0]);
        String address = System.getenv().getOrDefault("RDMA_LAB_MGMT_B", "127.0.0.1");
        try (ServerSocket server = new ServerSocket()) {
            server.setReuseAddress(true);
            server.bind(new InetSocketAddress(InetAddress.getByName(address), port), 64);
            System.out.println(READY + " on " + address + ":" + port);
            System.out.flush();
            while (true) {
                Socket socket = server.accept();
                Thread t = new Thread(() -> serve(socket), "agent-" + socket.getRemoteSocketAddress());
                t.setDaemon(true);
                t.start();
            }
        }
    }

    private static void serve(Socket socket) {
        Process process = null;
        try (socket) {
            socket.setTcpNoDelay(true);
            DataInputStream in = new DataInputStream(socket.getInputStream());
            DataOutputStream out = new DataOutputStream(socket.getOutputStream());
            List<String> argv = AgentProtocol.readStrings(in);
            List<String> env = AgentProtocol.readStrings(in);
            String cwd = AgentProtocol.readString(in);
            try {
                ProcessBuilder pb = new ProcessBuilder(argv).redirectErrorStream(true);
                if (!cwd.isEmpty()) {
                    pb.directory(new File(cwd));
                }
                for (String kv : env) {
                    int eq = kv.indexOf('=');
                    pb.environment().put(kv.substring(0, eq), kv.substring(eq + 1));
                }
                process = pb.start();
            } catch (IOException | RuntimeException e) {
                out.writeLong(-1);
                AgentProtocol.writeString(out, "cannot start " + argv + " on host B: " + e);
                out.flush();
                return;
            }
            out.writeLong(process.pid());
            out.flush();
            Process running = process;
            Thread pump = new Thread(() -> pump(running, out), "agent-output-" + process.pid());
            pump.setDaemon(true);
            pump.start();
            Thread control = new Thread(() -> control(running, in), "agent-control-" + process.pid());
            control.setDaemon(true);
            control.start();
            int code = process.waitFor();
            pump.join(TimeUnit.SECONDS.toMillis(30));
            synchronized (out) {
                AgentProtocol.writeFrame(out, AgentProtocol.EXIT, ByteBuffer.allocate(4).putInt(code).array(), 0, 4);
            }
        } catch (IOException | InterruptedException e) {
            // the client went away: nothing to report to
        } finally {
            if (process != null && process.isAlive()) {
                process.descendants().forEach(ProcessHandle::destroyForcibly);
                process.destroyForcibly();
            }
        }
    }

    /** Reads the client's frames until it goes away, which kills the process. */
    private static void control(Process process, DataInputStream in) {
        try {
            OutputStream stdin = process.getOutputStream();
            while (true) {
                AgentProtocol.Frame frame = AgentProtocol.readFrame(in);
                byte[] data = frame.data();
                switch (frame.type()) {
                    case AgentProtocol.STDIN -> {
                        stdin.write(data);
                        stdin.flush();
                    }
                    case AgentProtocol.STDIN_END -> stdin.close();
                    case AgentProtocol.SIGNAL -> signal(process, new String(data, StandardCharsets.UTF_8));
                    default -> throw new IOException("unknown frame type " + frame.type());
                }
            }
        } catch (IOException e) { // the client went away (end of stream) or broke the protocol
            kill(process);
        }
    }

    private static void kill(Process process) {
        if (process.isAlive()) {
            process.descendants().forEach(ProcessHandle::destroyForcibly);
            process.destroyForcibly();
        }
    }

    private static void signal(Process process, String name) throws IOException {
        if (!name.matches("[A-Z0-9]+")) {
            throw new IOException("not a signal name: " + name);
        }
        try {
            new ProcessBuilder("kill", "-" + name, Long.toString(process.pid())).inheritIO().start().waitFor();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void pump(Process process, DataOutputStream out) {
        byte[] buf = new byte[64 * 1024];
        try (InputStream output = process.getInputStream()) {
            int n;
            while ((n = output.read(buf)) > 0) {
                synchronized (out) {
                    AgentProtocol.writeFrame(out, AgentProtocol.OUTPUT, buf, 0, n);
                }
            }
        } catch (IOException e) {
            // the process or the client is gone
        }
    }
}
