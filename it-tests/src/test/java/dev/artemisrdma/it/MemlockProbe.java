package dev.artemisrdma.it;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;

import dev.artemisrdma.transport.RdmaServer;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.verbs.VerbsFabric;

/**
 * Started by FaultsLabTest as a non-root user with a small memlock limit: starts a transport (listen, connect) the
 * way a broker would and prints how that went. Exit {@link #REFUSED} with our message when registration is refused.
 */
public final class MemlockProbe {

    static final int STARTED = 0;
    static final int REFUSED = 3;
    static final int OTHER = 4;

    private MemlockProbe() {
    }

    public static void main(String[] args) {
        InetSocketAddress bind = new InetSocketAddress(args[0], Integer.parseInt(args[1]));
        ChannelHandler quiet = new ChannelHandler() {
            @Override
            public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            }

            @Override
            public void onClosed(RdmaChannel channel, FabricException cause) {
            }
        };
        try (VerbsFabric fabric = new VerbsFabric();
             RdmaTransport transport = RdmaTransport.create(fabric, TransportConfig.defaults())) {
            RdmaServer server = transport.listen(bind, ch -> quiet);
            RdmaChannel channel = transport.connect(server.localAddress(), quiet);
            channel.close();
            System.out.println("MemlockProbe: the transport started (memlock was enough)");
            System.exit(STARTED);
        } catch (FabricException | RuntimeException e) {
            String message = e.getMessage();
            boolean ours = message != null && message.contains("RLIMIT_MEMLOCK");
            System.out.println("MemlockProbe: " + (ours ? "refused: " : "failed otherwise: ") + e);
            System.exit(ours ? REFUSED : OTHER);
        }
    }
}
