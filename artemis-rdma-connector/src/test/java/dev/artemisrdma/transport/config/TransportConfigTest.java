package dev.artemisrdma.transport.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

class TransportConfigTest {

    @Test
    void defaults() {
        TransportConfig c = TransportConfig.defaults();
        assertEquals(64, c.receiveSlots());
        assertEquals(16384, c.slotSize());
        assertEquals(64 << 20, c.maxFrameSize());
        assertEquals(16, c.creditThreshold());
        assertEquals(128, c.sendQueueDepth());
        assertEquals(16, c.signalInterval());
        assertEquals(TransportConfig.INLINE_FITTED, c.maxInlineData(), "unset: fitted to the device");
        assertEquals(256, c.inlineWanted(), "up to 256");
        assertEquals(4 << 20, c.writeHighWaterMark());
        assertEquals(50, c.busyPollMicros());
        assertEquals(TransportConfig.BusyPollMode.ADAPTIVE, c.busyPollMode());
        assertEquals(1, c.completionThreads());
        assertEquals(7, c.rnrRetryCount());
        assertEquals(6, c.retryCount());
        assertEquals(Duration.ofSeconds(10), c.connectTimeout());
    }

    @Test
    void ackTimeoutDefaultsTo17AndRetryCountTo6MakingAFourSecondRetryBudget() {
        TransportConfig c = TransportConfig.defaults();
        assertEquals(17, c.ackTimeout());
        assertEquals(17, c.addressing().ackTimeout());
        // 4.096 us x 2^17 = 536,870,912 ns; (6 + 1) of them = 3,758,096,384 ns
        assertEquals(Duration.ofNanos(536_870_912L), c.addressing().ackTimeoutDuration());
        assertEquals(Duration.ofNanos(3_758_096_384L), c.retryBudget());
        assertEquals(Duration.ofNanos(2L * 536_870_912L), TransportConfig.builder().retryCount(1).build().retryBudget());
    }

    @Test
    void ackTimeoutIsParsedOverItsWholeRangeAndKeptByToBuilder() {
        for (int exponent = 1; exponent <= 31; exponent++) {
            TransportConfig c = TransportConfig.fromMap(Map.of("ackTimeout", String.valueOf(exponent)));
            assertEquals(exponent, c.ackTimeout());
            assertEquals(exponent, c.addressing().ackTimeout(), "the fabric gets it with the addressing");
            assertEquals(Duration.ofNanos(7L * (4096L << exponent)), c.retryBudget());
            assertEquals(c, c.toBuilder().build());
        }
        assertEquals(12, TransportConfig.fromMap(Map.of("ackTimeout", 12)).ackTimeout());
        assertTrue(TransportConfig.KEYS.contains("ackTimeout"));
    }

    @Test
    void maxInlineDataIsAutoOrABoundedNumber() {
        assertTrue(TransportConfig.fromMap(Map.of("maxInlineData", "auto")).inlineFitted());
        TransportConfig sixtyFour = TransportConfig.fromMap(Map.of("maxInlineData", "64"));
        assertEquals(64, sixtyFour.inlineWanted());
        assertFalse(sixtyFour.inlineFitted(), "a number is the user's: refused where the device cannot meet it");
        assertEquals(0, TransportConfig.fromMap(Map.of("maxInlineData", 0)).inlineWanted());
        for (String bad : new String[] {"-1", "4097", "lots"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> TransportConfig.fromMap(Map.of("maxInlineData", bad)));
            assertTrue(e.getMessage().startsWith("maxInlineData"), e.getMessage());
        }
    }

    @Test
    void allowedSourcesAreLiteralCidrBlocksCheckedAsTheyAreParsed() throws Exception {
        SourceNetworks nets = TransportConfig.fromMap(Map.of("allowedSources", "10.0.0.0/8, fd00:a::/32 192.168.1.7"))
                .allowedSources();
        assertEquals("10.0.0.0/8,fd00:a:0:0:0:0:0:0/32,192.168.1.7/32", nets.toString());
        assertTrue(nets.allows(java.net.InetAddress.getByName("10.200.3.4")));
        assertTrue(nets.allows(java.net.InetAddress.getByName("fd00:a:ffff::1")));
        assertTrue(nets.allows(java.net.InetAddress.getByName("192.168.1.7")));
        assertFalse(nets.allows(java.net.InetAddress.getByName("192.168.1.8")));
        assertFalse(nets.allows(java.net.InetAddress.getByName("fd00:b::1")));
        assertTrue(TransportConfig.defaults().allowedSources().isAny(), "unset: every source");
        String[][] bad = {{"10.1.2.3/8", "host bits set beyond /8; did you mean 10.0.0.0/8?"},
            {"broker.example.com", "is not an IPv4 or IPv6 address or CIDR block (host names are not accepted)"},
            {"10.0.0.0/33", "the prefix length must be 0..32"}, {" , ", "names no network"},
            {"fd00::/129", "the prefix length must be 0..128"}};
        for (String[] b : bad) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> TransportConfig.fromMap(Map.of("allowedSources", b[0])));
            assertTrue(e.getMessage().startsWith("allowedSources: ") && e.getMessage().contains(b[1]),
                    e.getMessage());
        }
        assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("ipv6SourcePrefix", "8")));
        assertEquals(512, TransportConfig.defaults().maxConnectionsPerSource());
    }

    @Test
    void ackTimeoutOutOfRangeIsRefusedNamingTheKey() {
        for (Object bad : new Object[] {"0", 32, "-1", 255}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> TransportConfig.fromMap(Map.of("ackTimeout", bad)));
            assertTrue(e.getMessage().startsWith("ackTimeout: must be 1..31"), e.getMessage());
            assertTrue(e.getMessage().endsWith("got " + bad), e.getMessage());
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("ackTimeout", "fast")));
        assertTrue(e.getMessage().startsWith("ackTimeout: not an integer"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TransportConfig.builder().ackTimeout(0).build());
        assertTrue(e.getMessage().startsWith("ackTimeout: must be 1..31"), e.getMessage());
    }

    @Test
    void fromMapParsesNumbersSizesAndDurations() {
        TransportConfig c = TransportConfig.fromMap(Map.of("receiveSlots", "8", "slotSize", "4k",
                "maxFrameSize", "16MiB", "writeHighWaterMark", 1024, "connectTimeout", "500ms",
                "rnrRetryCount", 0, "sendQueueDepth", "4"));
        assertEquals(8, c.receiveSlots());
        assertEquals(4096, c.slotSize());
        assertEquals(16 << 20, c.maxFrameSize());
        assertEquals(2, c.creditThreshold(), "derived from receiveSlots");
        assertEquals(4, c.signalInterval(), "clamped to a small send queue when not given");
        assertEquals(1024, c.writeHighWaterMark());
        assertEquals(Duration.ofMillis(500), c.connectTimeout());
        assertEquals(Duration.ofSeconds(10), TransportConfig.fromMap(Map.of("connectTimeout", "10s")).connectTimeout());
        assertEquals(Duration.ofSeconds(3), TransportConfig.fromMap(Map.of("connectTimeout", "PT3S")).connectTimeout());
    }

    @Test
    void busyPollModeIsParsedCaseInsensitivelyAndABadOneIsExplained() {
        assertEquals(TransportConfig.BusyPollMode.FIXED,
                TransportConfig.fromMap(Map.of("busyPollMode", "fixed")).busyPollMode());
        assertEquals(TransportConfig.BusyPollMode.OFF,
                TransportConfig.fromMap(Map.of("busyPollMode", " OFF ")).busyPollMode());
        assertEquals(TransportConfig.BusyPollMode.ADAPTIVE,
                TransportConfig.fromMap(Map.of("busyPollMode", "Adaptive")).busyPollMode());
        assertEquals(TransportConfig.BusyPollMode.FIXED, TransportConfig.fromMap(
                Map.of("busyPollMode", TransportConfig.BusyPollMode.FIXED)).busyPollMode());
        TransportConfig fixed = TransportConfig.builder().busyPollMode(TransportConfig.BusyPollMode.FIXED).build();
        assertEquals(fixed, fixed.toBuilder().build());
        assertTrue(!fixed.equals(TransportConfig.defaults()), "transports of different modes are not shared");
        assertTrue(TransportConfig.KEYS.contains("busyPollMode"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("busyPollMode", "spin")));
        assertTrue(e.getMessage().startsWith("busyPollMode: expected adaptive"), e.getMessage());
        assertTrue(e.getMessage().contains("'spin'") && e.getMessage().contains("busyPollMicros=0 never spins"),
                e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.builder().busyPollMode(null).build());
        assertTrue(e.getMessage().startsWith("busyPollMode"), e.getMessage());
    }

    @Test
    void unknownKeysAndBadValuesAreNamed() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("receiveSlot", 3, "bogus", 1)));
        assertTrue(e.getMessage().contains("[bogus, receiveSlot]"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TransportConfig.fromMap(Map.of("slotSize", "abc")));
        assertTrue(e.getMessage().startsWith("slotSize"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TransportConfig.fromMap(Map.of("slotSize", 100)));
        assertTrue(e.getMessage().startsWith("slotSize: must be 256"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TransportConfig.fromMap(Map.of("rnrRetryCount", 8)));
        assertTrue(e.getMessage().startsWith("rnrRetryCount"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("receiveSlots", 4, "creditThreshold", 5)));
        assertTrue(e.getMessage().startsWith("creditThreshold"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TransportConfig.fromMap(Map.of("creditThreshold", 0)));
        assertTrue(e.getMessage().startsWith("creditThreshold"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("connectTimeout", "soon")));
        assertTrue(e.getMessage().startsWith("connectTimeout"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("completionQueueEntries", 64, "receiveSlots", 64)));
        assertTrue(e.getMessage().startsWith("completionQueueEntries"), e.getMessage());
    }

    @Test
    void limitsHaveSafeDefaultsAndNamedErrors() {
        TransportConfig c = TransportConfig.defaults();
        assertEquals(Duration.ofSeconds(10), c.handshakeTimeout());
        assertEquals(1L << 30, c.maxRegisteredMemory());
        assertEquals(16, c.maxCompletionLoops());
        assertEquals(32, TransportConfig.fromMap(Map.of("completionThreads", 32)).maxCompletionLoops(),
                "the cap follows a larger completionThreads when not given");
        c = TransportConfig.fromMap(Map.of("handshakeTimeout", "2s", "maxRegisteredMemory", "256m",
                "maxCompletionLoops", "4"));
        assertEquals(Duration.ofSeconds(2), c.handshakeTimeout());
        assertEquals(256L << 20, c.maxRegisteredMemory());
        assertEquals(4, c.maxCompletionLoops());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("maxCompletionLoops", 2, "completionThreads", 3)));
        assertTrue(e.getMessage().startsWith("maxCompletionLoops: must be 3..256"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("maxRegisteredMemory", "4k")));
        assertTrue(e.getMessage().startsWith("maxRegisteredMemory"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TransportConfig.fromMap(Map.of("handshakeTimeout", 0)));
        assertTrue(e.getMessage().startsWith("handshakeTimeout"), e.getMessage());
    }

    @Test
    void sendFairnessBoundsHaveBrokerDefaultsAndNamedErrors() {
        TransportConfig c = TransportConfig.defaults();
        assertEquals((4L << 20) + 2 * (64L << 20), c.maxQueuedBytesPerConnection(),
                "writeHighWaterMark + 2 x maxFrameSize");
        assertEquals(Duration.ofSeconds(30), c.unwritableTimeout());
        c = TransportConfig.fromMap(Map.of("writeHighWaterMark", "1m", "maxFrameSize", "4m"));
        assertEquals((1L << 20) + (8L << 20), c.maxQueuedBytesPerConnection(), "derived from the keys it follows");
        assertEquals(c.maxQueuedBytesPerConnection(), c.toBuilder().maxFrameSize(4 << 20).build()
                .maxQueuedBytesPerConnection());
        assertEquals((1L << 20) + (16L << 20), c.toBuilder().maxFrameSize(8 << 20).build()
                .maxQueuedBytesPerConnection(), "toBuilder keeps it derived");
        c = TransportConfig.fromMap(Map.of("maxQueuedBytesPerConnection", "512m", "unwritableTimeout", "0"));
        assertEquals(512L << 20, c.maxQueuedBytesPerConnection());
        assertEquals(Duration.ZERO, c.unwritableTimeout(), "0 waits for ever");
        assertEquals(Long.MAX_VALUE, TransportConfig.fromMap(Map.of("writeHighWaterMark", Long.MAX_VALUE - 1))
                .maxQueuedBytesPerConnection(), "the derived value saturates instead of wrapping");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("maxQueuedBytesPerConnection", "64m")));
        assertTrue(e.getMessage().startsWith("maxQueuedBytesPerConnection: must be at least writeHighWaterMark"),
                e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("maxQueuedBytesPerConnection", "9999999999g")));
        assertTrue(e.getMessage().startsWith("maxQueuedBytesPerConnection"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("unwritableTimeout", "-5s")));
        assertTrue(e.getMessage().startsWith("unwritableTimeout"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("unwritableTimeout", "PT10000000H")));
        assertTrue(e.getMessage().startsWith("unwritableTimeout"), e.getMessage());
    }

    @Test
    void theSharedPoolsAdmissionReserveIsAnEighthOfThePoolUnlessSet() {
        assertEquals(64, TransportConfig.defaults().sharedReceiveReserve(), "an eighth of 512");
        TransportConfig c = TransportConfig.fromMap(Map.of("sharedReceiveSlots", "1024"));
        assertEquals(128, c.sharedReceiveReserve(), "derived from the pool it is part of");
        assertEquals(32, c.toBuilder().sharedReceiveSlots(256).build().sharedReceiveReserve(),
                "toBuilder keeps it derived");
        assertEquals(TransportConfig.SHARED_MIN_CREDITS, TransportConfig.fromMap(Map.of("sharedReceiveSlots", "24"))
                .sharedReceiveReserve(), "never below one connection's minimum");
        assertEquals(0, TransportConfig.fromMap(Map.of("sharedReceiveReserve", "0")).sharedReceiveReserve());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("sharedReceiveReserve", "513")));
        assertTrue(e.getMessage().startsWith("sharedReceiveReserve: must be 0..512"), e.getMessage());
    }

    @Test
    void toBuilderKeepsDerivedValuesDerived() {
        TransportConfig c = TransportConfig.defaults().toBuilder().receiveSlots(2).sendQueueDepth(2).build();
        assertEquals(1, c.creditThreshold());
        assertEquals(2, c.signalInterval());
    }

    @Test
    void peerBoundsHaveSafeDefaultsAndAreValidated() {
        TransportConfig d = TransportConfig.defaults();
        assertEquals(64 << 20, d.maxReassemblyBytes());
        assertEquals(256L << 20, d.reassemblyMemory());
        assertEquals(Duration.ofSeconds(30), d.reassemblyTimeout());
        assertEquals(Duration.ofSeconds(2), d.closeTimeout());
        TransportConfig c = TransportConfig.fromMap(Map.of("maxReassemblyBytes", "1m", "reassemblyMemory", "8MiB",
                "reassemblyTimeout", "5s", "closeTimeout", "500ms"));
        assertEquals(1 << 20, c.maxReassemblyBytes());
        assertEquals(8 << 20, c.reassemblyMemory());
        assertEquals(Duration.ofSeconds(5), c.reassemblyTimeout());
        assertEquals(Duration.ofMillis(500), c.closeTimeout());
        assertEquals(c, c.toBuilder().build());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("maxReassemblyBytes", "512m")));
        assertTrue(e.getMessage().startsWith("reassemblyMemory: must be 536870912.."), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TransportConfig.fromMap(Map.of("closeTimeout", 0)));
        assertTrue(e.getMessage().startsWith("closeTimeout: must be positive"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TransportConfig.fromMap(Map.of("maxFrameSize", 100)));
        assertTrue(e.getMessage().startsWith("maxFrameSize: must be 4096"), e.getMessage());
    }

    @Test
    void aSharedPoolThatCanNeverBeRegisteredIsRefusedAtConfiguration() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("maxRegisteredMemory", "4m", "slotSize", "16k")));
        assertTrue(e.getMessage().startsWith("maxRegisteredMemory") && e.getMessage().contains("sharedReceiveSlots")
                && e.getMessage().contains("sharedReceiveQueue=false"), e.getMessage());
        TransportConfig perConnection = TransportConfig.fromMap(Map.of("maxRegisteredMemory", "4m",
                "sharedReceiveQueue", "false"));
        assertEquals(4L << 20, perConnection.maxRegisteredMemory());
    }

    @Test
    void productsThatWouldOverflowAreRefusedNamingTheirKeys() {
        // (255 + 1) x 16 MiB is 4 GiB: in int arithmetic a zero-byte receive region
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> TransportConfig.fromMap(
                Map.of("receiveSlots", "255", "slotSize", "16m", "sharedReceiveQueue", "false")));
        assertTrue(e.getMessage().startsWith("receiveSlots (255) + 1 reserve x slotSize (16777216) + sendQueueDepth"
                + " (128) x 16 header bytes = 4294969344 bytes") && e.getMessage().contains("lower receiveSlots or"
                + " slotSize"), e.getMessage());
        // the largest region that fits one registration is accepted, and sized by the config alone
        TransportConfig largest = TransportConfig.fromMap(
                Map.of("receiveSlots", "126", "slotSize", "16m", "sharedReceiveQueue", "false"));
        assertEquals(127 * (16 << 20), largest.receiveRegionBytes());
        assertEquals(127 * (16 << 20) + 128 * 16, largest.registeredBytesPerConnection(false));

        // 512 x 16 MiB is 8 GiB: below a raised maxRegisteredMemory, yet more than one registration takes
        e = assertThrows(IllegalArgumentException.class, () -> TransportConfig.fromMap(
                Map.of("slotSize", "16m", "maxRegisteredMemory", "16g")));
        assertTrue(e.getMessage().startsWith("sharedReceiveSlots (512) x slotSize (16777216) = 8589934592 bytes")
                && e.getMessage().contains("sharedReceiveQueue=false"), e.getMessage());

        // timeouts become nanoseconds added to clock readings
        e = assertThrows(IllegalArgumentException.class,
                () -> TransportConfig.fromMap(Map.of("closeTimeout", "PT2000000H")));
        assertTrue(e.getMessage().startsWith("closeTimeout: must be at most PT8760H"), e.getMessage());
    }

    @Test
    void derivedValuesComeFromTheConfiguration() {
        TransportConfig c = TransportConfig.fromMap(Map.of("receiveSlots", "64", "creditThreshold", "64"));
        assertEquals(65, c.postedReceives(), "receiveSlots and the reserve");
        assertEquals(8, c.repostBatch());
        assertEquals(56, c.creditThresholdInForce());
        assertEquals(65 + 128, c.completionEntriesPerConnection(false));
        assertEquals(128, c.completionEntriesPerConnection(true));
        assertEquals(65 * 16384, c.receiveRegionBytes());
        assertEquals(128 * 16, c.registeredBytesPerConnection(true));
        assertEquals(512L * 16384, c.sharedPoolBytes());
        assertEquals(65, c.sharedMaxCredits());
        assertEquals(3, c.sharedCreditThreshold(TransportConfig.SHARED_MIN_CREDITS));
    }

    @Test
    void creditThresholdLeavesRoomForGroupedReposts() {
        assertEquals(56, TransportConfig.effectiveCreditThreshold(64, 64, 8));
        assertEquals(16, TransportConfig.effectiveCreditThreshold(64, 16, 8));
        assertEquals(1, TransportConfig.effectiveCreditThreshold(1, 1, 1));
        assertEquals(1, TransportConfig.effectiveCreditThreshold(2, 2, 1));
    }
}
