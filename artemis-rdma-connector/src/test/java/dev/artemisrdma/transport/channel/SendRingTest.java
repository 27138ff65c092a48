package dev.artemisrdma.transport.channel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The send ring's slot arithmetic across many wrap-arounds, against a plain model. */
class SendRingTest {

    @Test
    void slotsWrapAndRetireInOrder() {
        SendRing ring = new SendRing(5, 2);
        long posted = 0;
        long retired = 0;
        java.util.Random rnd = new java.util.Random(7);
        for (int step = 0; step < 10_000; step++) {
            if (ring.free() > 0 && rnd.nextBoolean()) {
                assertEquals((int) (posted % 5), ring.nextSlot());
                ring.claim(null, false);
                posted++;
            } else if (posted > retired) {
                long through = retired + rnd.nextInt((int) (posted - retired));
                assertEquals((int) (through - retired + 1), ring.retireThrough((int) (through % 5)));
                retired = through + 1;
            }
            assertEquals((int) (posted - retired), ring.outstanding());
        }
    }

    @Test
    void aSlotNotOutstandingRetiresNothing() {
        SendRing ring = new SendRing(4, 4);
        for (int i = 0; i < 6; i++) { // wraps once
            ring.claim(null, false);
            ring.retireThrough(i % 4);
        }
        ring.claim(null, false); // slot 2
        assertEquals(0, ring.retireThrough(3));
        assertEquals(0, ring.retireThrough(1));
        assertEquals(1, ring.retireThrough(2));
        assertEquals(0, ring.outstanding());
    }

    @Test
    void unclaimingAtTheWrapTakesBackTheLastSlot() {
        SendRing ring = new SendRing(3, 1);
        for (int i = 0; i < 3; i++) {
            assertTrue(ring.claim(null, false), "interval 1 signals every request");
        }
        ring.retireThrough(2);
        assertEquals(0, ring.nextSlot());
        ring.claim(null, false);
        ring.unclaimLast();
        assertEquals(0, ring.nextSlot());
        assertEquals(0, ring.signaledOutstanding());
        assertEquals(0, ring.outstanding());
        assertFalse(ring.free() < 3);
    }
}
