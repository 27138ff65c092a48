package dev.artemisrdma.transport.loop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.FakeFabric;
import dev.artemisrdma.transport.RdmaTransport;
import dev.artemisrdma.transport.channel.ChannelHooks;
import dev.artemisrdma.transport.channel.ChannelSpec;
import dev.artemisrdma.transport.channel.RdmaChannelImpl;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;

/** The loop's allocation-free queue pair lookup against a HashMap model. */
class QueuePairTableTest {

    @Test
    void behavesLikeAMapUnderRandomChurn() {
        QueuePairTable table = new QueuePairTable();
        Map<Integer, LoopChannel> model = new HashMap<>();
        Random rnd = new Random(11);
        for (int step = 0; step < 20_000; step++) {
            int qpn = 1 + rnd.nextInt(3000);
            if (rnd.nextInt(3) == 0 && model.containsKey(qpn)) {
                table.remove(qpn, model.remove(qpn));
            } else if (!model.containsKey(qpn)) {
                LoopChannel ch = fake(rnd.nextInt(8));
                model.put(qpn, ch);
                table.put(qpn, ch);
            }
            int probe = 1 + rnd.nextInt(3000);
            assertSame(model.get(probe), table.get(probe));
        }
        assertEquals(model.size(), table.size());
        assertNull(table.get(0));
    }

    private static final LoopChannel[] FAKES = new LoopChannel[8];
    private static final RdmaTransport TRANSPORT = RdmaTransport.create(new FakeFabric(), TransportConfig.defaults());

    /** Distinct channel objects (never connected): identity is all the table compares. */
    private static LoopChannel fake(int i) {
        if (FAKES[i] == null) {
            try {
                FAKES[i] = ChannelHooks.loopChannel(new RdmaChannelImpl(TRANSPORT, TransportConfig.defaults(),
                        "t" + i, null, null, null, ChannelSpec.connecting(false)));
            } catch (FabricException e) {
                throw new AssertionError(e); // no peer in the spec: nothing to refuse
            }
        }
        return FAKES[i];
    }
}
