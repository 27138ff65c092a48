package dev.artemisrdma.it.hosts;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PipedInputStream;
import java.io.PipedOutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * A process that {@link HostAgent} runs on another lab host, seen through {@link Process} so that
 * {@code JavaProcess} and every caller of it handle it like a local child: its output (stdout and stderr merged),
 * its stdin, {@link #destroy} (SIGTERM), {@link #destroyForcibly} (SIGKILL), {@link #signal}, the exit code.
 * {@link #pid} is the pid on the other host. One reader thread owns the connection's input; writers hold the output's
 * monitor.
 */
public final class RemoteProcess extends Process {

    private final String host;
    private final Socket socket;
    private final DataOutputStream out;
    private final long pid;
    private final PipedInputStream output = new PipedInputStream(1 << 20);
    private final CountDownLatch exited = new CountDownLatch(1);
    private volatile int exitCode = Integer.MIN_VALUE;

    private RemoteProcess(String host, Socket socket, DataOutputStream out, long pid) {
        this.host = host;
        this.socket = socket;
        this.out = out;
        this.pid = pid;
    }

    /** Starts {@code command} on the agent at {@code agent}, retrying the connection until {@code connectSeconds}. */
    static RemoteProcess start(String host, InetSocketAddress agent, List<String> command, List<String> env,
                               String cwd, long connectSeconds) throws IOException {
        Socket socket = connect(host, agent, connectSeconds);
        try {
            socket.setTcpNoDelay(true);
            DataOutputStream out = new DataOutputStream(socket.getOutputStream());
            DataInputStream in = new DataInputStream(socket.getInputStream());
            AgentProtocol.writeStrings(out, command);
            AgentProtocol.writeStrings(out, env);
            AgentProtocol.writeString(out, cwd == null ? "" : cwd);
            out.flush();
            long pid = in.readLong();
            if (pid < 0) {
                throw new IOException(AgentProtocol.readString(in));
            }
            RemoteProcess process = new RemoteProcess(host, socket, out, pid);
            PipedOutputStream sink = new PipedOutputStream(process.output);
            Thread reader = new Thread(() -> process.read(in, sink), "remote-" + host + "-" + pid);
            reader.setDaemon(true);
            reader.start();
            return process;
        } catch (IOException | RuntimeException e) {
            socket.close();
            throw e;
        }
    }

    private static Socket connect(String host, InetSocketAddress agent, long seconds) throws IOException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        IOException last;
        do {
            Socket socket = new Socket();
            try {
                socket.connect(agent, 2000);
                return socket;
            } catch (IOException e) {
                socket.close();
                last = e;
            }
            try {
                Thread.sleep(250);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted while connecting to the agent of host " + host, e);
            }
        } while (System.nanoTime() < deadline);
        throw new IOException("no process agent answers on host " + host + " at " + agent + " after " + seconds
                + " s (is the lab running with --hosts 2 and the agent started with --on-b?): " + last, last);
    }

    private void read(DataInputStream in, PipedOutputStream sink) {
        try {
            while (true) {
                AgentProtocol.Frame frame = AgentProtocol.readFrame(in);
                if (frame.type() == AgentProtocol.OUTPUT) {
                    sink.write(frame.data());
                    sink.flush();
                } else if (frame.type() == AgentProtocol.EXIT) {
                    exitCode = ByteBuffer.wrap(frame.data()).getInt();
                    return;
                }
            }
        } catch (IOException e) {
            if (exitCode == Integer.MIN_VALUE) {
                exitCode = 255; // the agent or its host went away: report it as a failed process
            }
        } finally {
            try {
                sink.close();
            } catch (IOException ignored) {
                // nothing left to tell the reader
            }
            try {
                socket.close();
            } catch (IOException ignored) {
                // closing
            }
            exited.countDown();
        }
    }

    /** Sends {@code signal} (TERM, KILL, STOP, CONT, ...) to the process on its host. */
    public void signal(String signal) throws IOException {
        send(AgentProtocol.SIGNAL, signal.getBytes(StandardCharsets.UTF_8));
    }

    private void send(byte type, byte[] data) throws IOException {
        synchronized (out) {
            AgentProtocol.writeFrame(out, type, data, 0, data.length);
        }
    }

    public String host() {
        return host;
    }

    @Override
    public OutputStream getOutputStream() {
        return new OutputStream() {
            @Override
            public void write(int b) throws IOException {
                write(new byte[] {(byte) b}, 0, 1);
            }

            @Override
            public void write(byte[] b, int off, int len) throws IOException {
                synchronized (out) {
                    AgentProtocol.writeFrame(out, AgentProtocol.STDIN, b, off, len);
                }
            }

            @Override
            public void close() throws IOException {
                if (exited.getCount() > 0) {
                    send(AgentProtocol.STDIN_END, new byte[0]);
                }
            }
        };
    }

    @Override
    public InputStream getInputStream() {
        return output;
    }

    @Override
    public InputStream getErrorStream() {
        return InputStream.nullInputStream();
    }

    @Override
    public int waitFor() throws InterruptedException {
        exited.await();
        return exitCode;
    }

    @Override
    public boolean waitFor(long timeout, TimeUnit unit) throws InterruptedException {
        return exited.await(timeout, unit);
    }

    @Override
    public int exitValue() {
        if (exited.getCount() > 0) {
            throw new IllegalThreadStateException("process " + pid + " on host " + host + " has not exited");
        }
        return exitCode;
    }

    @Override
    public boolean isAlive() {
        return exited.getCount() > 0;
    }

    @Override
    public long pid() {
        return pid;
    }

    @Override
    public void destroy() {
        signalQuietly("TERM");
    }

    @Override
    public Process destroyForcibly() {
        signalQuietly("KILL");
        return this;
    }

    private void signalQuietly(String signal) {
        try {
            if (isAlive()) {
                signal(signal);
            }
        } catch (IOException e) {
            // the connection is gone, and with it the process (the agent kills what loses its client)
        }
    }

    @Override
    public String toString() {
        return "process " + pid + " on host " + host;
    }
}
