package dev.artemisrdma.it.hosts;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The wire format between {@link RemoteProcess} (on host A) and {@link HostAgent} (on host B), over the lab's
 * management link, one TCP connection per process. The client sends the command (argv, environment overrides,
 * working directory); the agent answers the pid (or -1 and why it could not start); then both send frames of
 * {@code type byte, length int, bytes}: stdin data, stdin end and signals one way, output and the exit code the
 * other. A connection that closes before the exit code kills the process: a test that dies leaves nothing on B.
 */
final class AgentProtocol {

    /** Client to agent: bytes for the process's stdin. */
    static final byte STDIN = 'I';
    /** Client to agent: close the process's stdin. */
    static final byte STDIN_END = 'E';
    /** Client to agent: send the signal named in the payload (TERM, KILL, STOP, CONT, ...). */
    static final byte SIGNAL = 'S';
    /** Agent to client: bytes the process wrote (stdout and stderr merged). */
    static final byte OUTPUT = 'O';
    /** Agent to client: the exit code (payload: 4 bytes); the last frame. */
    static final byte EXIT = 'X';

    /** A single frame's payload bound (the agent reads 64 KiB at a time; this guards against a corrupt length). */
    static final int MAX_FRAME = 1 << 20;

    private AgentProtocol() {
    }

    static void writeString(DataOutputStream out, String s) throws IOException {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        out.writeInt(b.length);
        out.write(b);
    }

    static String readString(DataInputStream in) throws IOException {
        int n = in.readInt();
        if (n < 0 || n > MAX_FRAME) {
            throw new IOException("string length " + n + " out of bounds");
        }
        byte[] b = new byte[n];
        in.readFully(b);
        return new String(b, StandardCharsets.UTF_8);
    }

    static void writeStrings(DataOutputStream out, List<String> strings) throws IOException {
        out.writeInt(strings.size());
        for (String s : strings) {
            writeString(out, s);
        }
    }

    static List<String> readStrings(DataInputStream in) throws IOException {
        int n = in.readInt();
        if (n < 0 || n > 10_000) {
            throw new IOException("list length " + n + " out of bounds");
        }
        List<String> list = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            list.add(readString(in));
        }
        return list;
    }

    /** One frame as read: its type and payload. */
    record Frame(byte type, byte[] data) {
    }

    /** Reads the next frame; its length is bounded before anything is allocated. */
    static Frame readFrame(DataInputStream in) throws IOException {
        byte type = in.readByte();
        int len = in.readInt();
        if (len < 0 || len > MAX_FRAME) {
            throw new IOException("frame length " + len + " out of bounds");
        }
        byte[] data = new byte[len];
        in.readFully(data);
        return new Frame(type, data);
    }

    /** Writes one frame; callers that share {@code out} between threads hold its monitor. */
    static void writeFrame(DataOutputStream out, byte type, byte[] data, int off, int len) throws IOException {
        out.writeByte(type);
        out.writeInt(len);
        out.write(data, off, len);
        out.flush();
    }
}
