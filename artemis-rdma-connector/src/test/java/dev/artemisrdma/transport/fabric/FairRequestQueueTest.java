package dev.artemisrdma.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/** Requests served one per source per round, bounded per source and in all (issue 37 item 1). */
class FairRequestQueueTest {

    @Test
    void aFloodingSourceDelaysAnotherByOneRequestNotByItsBacklog() {
        FairRequestQueue<String, String> q = new FairRequestQueue<>(256, 1024);
        for (int i = 0; i < 200; i++) {
            assertTrue(q.offer("flood", "f" + i));
        }
        q.offer("honest", "h0");
        List<String> first = q.round();
        assertEquals(List.of("f0", "h0"), first, "the honest request goes in the first round, after one of the flood");
        q.offer("honest", "h1");
        assertEquals(List.of("f1", "h1"), q.round());
        List<String> rest = new ArrayList<>();
        while (!q.isEmpty()) {
            rest.addAll(q.round());
        }
        assertEquals(198, rest.size());
        assertEquals("f2", rest.get(0));
        assertEquals("f199", rest.get(197), "each source's requests stay in their order");
    }

    @Test
    void aSourceBeyondItsBoundAndAllBeyondTheTotalAreRefused() {
        FairRequestQueue<String, Integer> q = new FairRequestQueue<>(3, 5);
        for (int i = 0; i < 3; i++) {
            assertTrue(q.offer("a", i));
        }
        assertFalse(q.offer("a", 3), "a's fourth waits beyond its bound");
        assertTrue(q.offer("b", 0));
        assertTrue(q.offer("c", 0));
        assertFalse(q.offer("d", 0), "five wait in all");
        assertEquals(5, q.size());
        assertEquals(List.of(0, 0, 0), q.round());
        assertTrue(q.offer("d", 0), "room again after a round");
        assertEquals(3, q.drain().size());
        assertTrue(q.isEmpty());
    }

    @Test
    void anIpv6HostIsItsSlash64AndAnIpv4HostItsAddress() throws Exception {
        assertEquals(InetAddress.getByName("fd00:1:2:3::"),
                SourceAddresses.host(InetAddress.getByName("fd00:1:2:3:4:5:6:7")));
        assertEquals(InetAddress.getByName("10.1.2.3"), SourceAddresses.host(InetAddress.getByName("10.1.2.3")));
    }
}
