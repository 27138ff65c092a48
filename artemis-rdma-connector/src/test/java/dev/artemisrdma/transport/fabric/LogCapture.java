package dev.artemisrdma.transport.fabric;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * What the tests' slf4j-simple logger writes while open: it writes to whatever {@code System.err} is when it logs, so
 * a test can count the lines a flood produced. Still echoed to the real stream. Opening one starts every
 * {@link LogLimiter} site's interval afresh: the sites are static, and a test that ran earlier in this JVM may have
 * spent their lines.
 */
public final class LogCapture implements AutoCloseable {

    private final PrintStream original = System.err;
    private final ByteArrayOutputStream bytes = new ByteArrayOutputStream();

    public LogCapture() {
        LogLimiter.restartAll();
        PrintStream tee = new PrintStream(new java.io.OutputStream() {
            @Override
            public void write(int b) {
                synchronized (bytes) {
                    bytes.write(b);
                }
                original.write(b);
            }

            @Override
            public void write(byte[] b, int off, int len) {
                synchronized (bytes) {
                    bytes.write(b, off, len);
                }
                original.write(b, off, len);
            }
        }, true, StandardCharsets.UTF_8);
        System.setErr(tee);
    }

    /** The lines logged so far that contain {@code text}. */
    public long count(String text) {
        String all;
        synchronized (bytes) {
            all = bytes.toString(StandardCharsets.UTF_8);
        }
        return Arrays.stream(all.split("\n")).filter(l -> l.contains(text)).count();
    }

    @Override
    public void close() {
        System.setErr(original);
    }
}
