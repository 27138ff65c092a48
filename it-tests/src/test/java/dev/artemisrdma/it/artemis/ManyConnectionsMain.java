package dev.artemisrdma.it.artemis;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import dev.artemisrdma.transport.Peers;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.verbs.VerbsFabric;

/**
 * One host that opens {@code COUNT} connections to {@code HOST:PORT} with our transport and keeps them open and
 * silent (the two-host lab's B, against a listener on A): prints {@code OPENED n REFUSED m FIRST-REFUSAL reason},
 * then holds them until its stdin closes, closes them and prints {@code CLOSED}. Small receive queues on this side,
 * so that B's own memory is not what limits it.
 */
public final class ManyConnectionsMain {

    public static final String OPENED = "OPENED";

    private ManyConnectionsMain() {
    }

    public static void main(String[] args) throws Exception {
        InetSocketAddress to = new InetSocketAddress(args[0], Integer.parseInt(args[1]));
        int count = Integer.parseInt(args[2]);
        TransportConfig config = TransportConfig.builder().receiveSlots(8).slotSize(4096).sendQueueDepth(16)
                .maxFrameSize(64 << 10).build();
        List<RdmaChannel> open = new ArrayList<>();
        int refused = 0;
        String firstRefusal = "none";
        try (VerbsFabric fabric = new VerbsFabric(); RdmaTransport transport = RdmaTransport.create(fabric, config)) {
            for (int i = 0; i < count; i++) {
                try {
                    open.add(transport.connect(to, new Peers.Recorder()));
                } catch (FabricException e) {
                    if (refused++ == 0) {
                        firstRefusal = e.getMessage();
                    }
                }
            }
            System.out.println(OPENED + " " + open.size() + " REFUSED " + refused + " FIRST-REFUSAL " + firstRefusal);
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                while (in.readLine() != null) {
                    // held until the driver closes stdin
                }
            }
            open.forEach(RdmaChannel::close);
            System.out.println("CLOSED");
        }
    }
}
