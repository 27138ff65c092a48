package dev.artemisrdma.it.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.artemisrdma.it.JavaProcess;
import dev.artemisrdma.it.Lab;
import dev.artemisrdma.it.hosts.LabHost;
import dev.artemisrdma.it.hosts.WireCounters;
import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.api.SendBuffer;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.verbs.VerbsFabric;

/**
 * A shortened transport soak across the wire (issue 35): 20,000 frames of 1 B to 1 MiB from host B to an echoing
 * server on A and back, each checked in order and byte for byte on B ({@link WireSoakClientMain}), with the
 * defaults; nothing lost, nothing bad, RNR 0, and both hosts' NIC and rxe counters proving the frames crossed the wire.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class WireSoakLabTest {

    private static final int FRAMES = 20_000;
    private static final Pattern SOAK = Pattern.compile("SOAK sent=(\\d+) received=(\\d+) bad=(\\d+) .*bytes=(\\d+)");

    @Test
    void twentyThousandFramesEchoAcrossTheWireInOrderAndIntact() throws Exception {
        LabHost.requireTwoHosts();
        int port = Lab.freshPort();
        WireCounters a0 = LabHost.a().counters();
        WireCounters b0 = LabHost.b().counters();
        try (VerbsFabric fabric = new VerbsFabric();
             RdmaTransport server = RdmaTransport.create(fabric, TransportConfig.defaults())) {
            RdmaServer listening = server.listen(new InetSocketAddress(LabHost.a().wireAddress(), port),
                    channel -> ECHO);
            try (JavaProcess client = JavaProcess.driven("wire-soak", WireSoakClientMain.class).on(LabHost.b())
                    .jvm("-Xmx512m").start(LabHost.a().wireAddress(), String.valueOf(port), String.valueOf(FRAMES),
                            "35")) {
                String line = client.await("SOAK", 540);
                WireCounters a = LabHost.a().counters().since(a0);
                WireCounters b = LabHost.b().counters().since(b0);
                System.out.println("wire soak: " + line + "; " + a.summary() + "; " + b.summary());
                Matcher m = SOAK.matcher(line);
                assertEquals(true, m.find(), line);
                assertEquals(FRAMES, Long.parseLong(m.group(2)), "echoes received: " + line);
                assertEquals(0, Long.parseLong(m.group(3)), "echoes not as sent: " + line);
                assertEquals(0, a.rnr() + b.rnr(), "RNR: " + a.summary() + "; " + b.summary());
                // every frame crossed twice, most in several packets
                a.requireRoceCrossedTheWire(2L * FRAMES);
                b.requireRoceCrossedTheWire(2L * FRAMES);
            }
            listening.close();
        }
    }

    /** Writes every frame back as it came, from the completion loop (the client holds a bounded window). */
    private static final ChannelHandler ECHO = new ChannelHandler() {
        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            SendBuffer reply = channel.allocate(frame.remaining());
            reply.buffer().put(frame);
            try {
                channel.write(reply, true);
            } catch (FabricException e) {
                System.out.println("wire soak: the echo failed: " + e.getMessage()); // the client then misses it
            }
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
        }
    };
}
