package dev.artemisrdma.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.FabricException;

/**
 * The transport on real devices' limits ({@link DeviceProfile}): the default configuration connects and carries
 * every kind of frame on each (inline fitted, no shared receive queue where there is none, no immediate data on
 * iWARP), a device's unreported inline limit is found by its refusals once, and what a device cannot meet is refused
 * naming the key and the limit.
 */
class DeviceProfilesTest {

    private static final TransportConfig DEFAULTS = TransportConfig.builder().build();

    @ParameterizedTest
    @EnumSource(value = DeviceProfile.class, names = "EFA", mode = EnumSource.Mode.EXCLUDE)
    void theDefaultConfigurationCarriesEveryKindOfFrame(DeviceProfile profile) throws Exception {
        FakeFabric fabric = profile.fabric();
        try (Connection c = new Connection(fabric, DEFAULTS, DEFAULTS)) {
            List<byte[]> frames = new ArrayList<>();
            int[] sizes = {1, 40, 60, 90, 120, 250, 4000, 16_384, 100_000, 300_000, 3};
            for (int i = 0; i < sizes.length; i++) {
                frames.add(Peers.payload(profile.ordinal(), i, sizes[i]));
            }
            for (int i = 0; i < frames.size(); i++) { // small ones unflushed: they pack into shared SENDs
                c.client.write(ByteBuffer.wrap(frames.get(i)), i == frames.size() - 1 || sizes[i] > 200);
                c.serverChannel.write(ByteBuffer.wrap(frames.get(i)), i == frames.size() - 1 || sizes[i] > 200);
            }
            Peers.await("every frame both ways", 10_000,
                    () -> c.serverSide.count() == frames.size() && c.clientSide.count() == frames.size());
            for (int i = 0; i < frames.size(); i++) {
                assertEquals(Peers.crc(frames.get(i)), c.serverSide.crcs.get(i), "frame " + i + " at the server");
                assertEquals(Peers.crc(frames.get(i)), c.clientSide.crcs.get(i), "frame " + i + " at the client");
            }
            int deviceInline = profile.limits().maxInlineData();
            for (int granted : fabric.grantedInline()) {
                assertEquals(Math.min(deviceInline, TransportConfig.FITTED_INLINE_CEILING), granted,
                        "inline fitted to " + profile);
            }
            assertEquals(0, fabric.refusedInlineCreates(), "the device's reported limit is asked, never more");
            boolean immediate = profile.limits().transport().sendsImmediateData();
            if (!immediate) {
                assertEquals(0, c.client.stats().immediateSends(), c.client.stats().toString());
                assertEquals(0, c.serverChannel.stats().immediateSends(), c.serverChannel.stats().toString());
            } else {
                assertTrue(c.client.stats().immediateSends() > 0, "fragments' headers in immediate data on "
                        + profile + ": " + c.client.stats());
            }
            assertEquals(profile.limits().maxSrq() > 0 ? 1 : 0, fabric.liveSharedReceiveQueues(),
                    "a shared receive queue only where the device has them");
        }
    }

    @ParameterizedTest
    @EnumSource(value = DeviceProfile.class, names = {"E810_ROCE", "X722_IWARP", "SIW"})
    void anUnreportedInlineLimitIsFoundByRefusalsOnceAndKeptForTheDevice(DeviceProfile profile) throws Exception {
        FakeFabric fabric = new FakeFabric(profile.limits().inlineUnreported());
        try (Connection first = new Connection(fabric, DEFAULTS, DEFAULTS)) {
            first.client.write(ByteBuffer.wrap(Peers.payload(1, 0, 40)), true);
            Peers.await("the frame", 5000, () -> first.serverSide.count() == 1);
            int refusals = fabric.refusedInlineCreates();
            assertTrue(refusals > 0, "256 inline bytes were asked first and refused");
            // the client's queue pair learned on the client's transport, the server's on its own: each once
            RdmaChannel second = first.clientTransport.connect(first.server.localAddress(), new Peers.Recorder());
            Peers.await("the second channel", 5000, second::isOpen);
            assertEquals(refusals, fabric.refusedInlineCreates(), "the device's limit is remembered");
            for (int granted : fabric.grantedInline()) {
                assertTrue(granted <= profile.limits().maxInlineData() && granted >= profile.limits().maxInlineData()
                        * 3 / 4, "granted " + granted + " of " + profile.limits().maxInlineData());
            }
            second.close();
        }
    }

    @Test
    void anExplicitMaxInlineDataTheDeviceCannotMeetIsRefusedNamingItsLimit() throws Exception {
        FakeFabric fabric = DeviceProfile.SIW.fabric();
        TransportConfig asks256 = TransportConfig.builder().maxInlineData(256).build();
        try (RdmaTransport server = RdmaTransport.create(fabric, DEFAULTS);
             RdmaTransport client = RdmaTransport.create(fabric, asks256)) {
            RdmaServer listening = server.listen(Peers.serverAddress(), Peers.admitting(ch -> { },
                    new Peers.Recorder()));
            FabricException e = assertThrows(FabricException.class,
                    () -> client.connect(listening.localAddress(), new Peers.Recorder()));
            assertTrue(e.getMessage().contains("maxInlineData=256 is more than RDMA device fake0 allows (80 inline "
                    + "bytes)"), e.getMessage());
            // what the device can meet is asked as it is
            try (RdmaTransport fits = RdmaTransport.create(fabric, TransportConfig.builder().maxInlineData(64)
                    .build())) {
                RdmaChannel ch = fits.connect(listening.localAddress(), new Peers.Recorder());
                Peers.await("open", 5000, ch::isOpen);
                ch.close();
            }
        } finally {
            fabric.close();
        }
        assertTrue(fabric.grantedInline().contains(64), fabric.grantedInline().toString());
    }

    @Test
    void anExplicitMaxInlineDataRefusedByADeviceThatDoesNotSayItsLimitNamesTheKey() throws Exception {
        FakeFabric fabric = new FakeFabric(DeviceProfile.E810_ROCE.limits().inlineUnreported());
        try (RdmaTransport server = RdmaTransport.create(fabric, DEFAULTS);
             RdmaTransport client = RdmaTransport.create(fabric, TransportConfig.builder().maxInlineData(200)
                     .build())) {
            RdmaServer listening = server.listen(Peers.serverAddress(), Peers.admitting(ch -> { },
                    new Peers.Recorder()));
            FabricException e = assertThrows(FabricException.class,
                    () -> client.connect(listening.localAddress(), new Peers.Recorder()));
            assertTrue(e.getMessage().startsWith("maxInlineData=200: RDMA device fake0 refused a queue pair asking 200"
                    + " inline bytes"), e.getMessage());
            assertEquals(1, fabric.refusedInlineCreates(), "one refusal, no ladder: the user's number stands");
        } finally {
            fabric.close();
        }
    }

    @Test
    void aDeviceWithoutReliableConnectionsIsRefusedByName() throws Exception {
        FakeFabric fabric = DeviceProfile.EFA.fabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, DEFAULTS);
             RdmaTransport client = RdmaTransport.create(fabric, DEFAULTS)) {
            RdmaServer listening = server.listen(Peers.serverAddress(), Peers.admitting(ch -> { },
                    new Peers.Recorder()));
            FabricException e = assertThrows(FabricException.class,
                    () -> client.connect(listening.localAddress(), new Peers.Recorder()));
            assertTrue(e.getMessage().contains("RDMA device fake0 has no reliable-connected queue pairs (AWS EFA"),
                    e.getMessage());
            assertEquals(0, fabric.liveQueuePairs());
        } finally {
            fabric.close();
        }
        fabric.assertNoViolations(); // no queue pair was ever asked of it
    }

    @Test
    void aSendQueueDeeperThanTheDeviceAllowsIsRefusedNamingItsLimit() throws Exception {
        FakeFabric fabric = DeviceProfile.E810_ROCE.fabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, DEFAULTS);
             RdmaTransport client = RdmaTransport.create(fabric, TransportConfig.builder().sendQueueDepth(8192)
                     .build())) {
            RdmaServer listening = server.listen(Peers.serverAddress(), Peers.admitting(ch -> { },
                    new Peers.Recorder()));
            FabricException e = assertThrows(FabricException.class,
                    () -> client.connect(listening.localAddress(), new Peers.Recorder()));
            assertTrue(e.getMessage().contains("sendQueueDepth=8192 is more than RDMA device fake0 allows "
                    + "(max_qp_wr 4096)"), e.getMessage());
        } finally {
            fabric.close();
        }
    }

    @Test
    void theServersExplicitInlineItsDeviceCannotMeetRejectsTheClientWithTheReason() throws Exception {
        FakeFabric fabric = DeviceProfile.X722_IWARP.fabric();
        try (RdmaTransport server = RdmaTransport.create(fabric, TransportConfig.builder().maxInlineData(100)
                .build());
             RdmaTransport client = RdmaTransport.create(fabric, DEFAULTS)) {
            RdmaServer listening = server.listen(Peers.serverAddress(), Peers.admitting(ch -> { },
                    new Peers.Recorder()));
            FabricException e = assertThrows(FabricException.class,
                    () -> client.connect(listening.localAddress(), new Peers.Recorder()));
            assertTrue(e.getMessage().contains("maxInlineData=100 is more than RDMA device fake0 allows (48"),
                    e.getMessage());
            Peers.await("nothing left on the server", 5000, () -> fabric.liveQueuePairs() == 0);
        } finally {
            fabric.close();
        }
    }
}
