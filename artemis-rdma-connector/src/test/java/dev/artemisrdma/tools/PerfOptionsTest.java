package dev.artemisrdma.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** RdmaPerf's options: where {@code --settle} applies, and the bounds that the protocol relies on. */
class PerfOptionsTest {

    private static final String[] CLIENT = {"client", "--connect", "10.0.0.1", "--port", "19000"};

    @Test
    void settleIsOffUnlessAsked() {
        assertEquals(0, PerfOptions.parse(CLIENT).settle());
    }

    @Test
    void settleAppliesToBothModesOfTheTransportLayer() {
        assertEquals(60, parse("--layer", "transport", "--mode", "lat", "--settle", "60").settle());
        PerfOptions stream = parse("--layer", "transport", "--mode", "bw", "--settle", "30");
        assertEquals(30, stream.settle());
        assertEquals("bw", stream.mode());
    }

    @Test
    void settleIsRefusedOnTheVerbsLayerWithTheReason() {
        for (String mode : new String[] {"lat", "bw"}) {
            IllegalArgumentException verbs = assertThrows(IllegalArgumentException.class,
                    () -> parse("--layer", "verbs", "--mode", mode, "--settle", "60"));
            assertTrue(verbs.getMessage().contains("--layer transport only"), verbs.getMessage());
            assertTrue(verbs.getMessage().contains("counts the messages the client announced"), verbs.getMessage());
        }
        assertEquals(0, parse("--layer", "verbs", "--mode", "bw", "--settle", "0").settle(), "0 is off anywhere");
    }

    @Test
    void settleAndWarmUpAreBounded() {
        IllegalArgumentException tooLong = assertThrows(IllegalArgumentException.class,
                () -> parse("--layer", "transport", "--settle", "601"));
        assertTrue(tooLong.getMessage().contains("0..600"), tooLong.getMessage());
        assertThrows(IllegalArgumentException.class, () -> parse("--layer", "transport", "--settle", "-1"));
        assertThrows(IllegalArgumentException.class, () -> parse("--layer", "transport", "--warmup", "-1"));
    }

    /** A settled stream marks a window's last frame in its first byte: every frame has one. */
    @Test
    void everyFrameHasAtLeastTheByteThatMarksIt() {
        assertEquals(1, parse("--layer", "transport", "--mode", "bw", "--size", "1", "--settle", "5").size());
        IllegalArgumentException empty = assertThrows(IllegalArgumentException.class,
                () -> parse("--layer", "transport", "--mode", "bw", "--size", "0", "--settle", "5"));
        assertTrue(empty.getMessage().contains("1..16777216"), empty.getMessage());
        assertThrows(IllegalArgumentException.class, () -> parse("--size", String.valueOf(PerfOptions.MAX_SIZE + 1)));
    }

    private static PerfOptions parse(String... more) {
        String[] all = java.util.Arrays.copyOf(CLIENT, CLIENT.length + more.length);
        System.arraycopy(more, 0, all, CLIENT.length, more.length);
        return PerfOptions.parse(all);
    }
}
