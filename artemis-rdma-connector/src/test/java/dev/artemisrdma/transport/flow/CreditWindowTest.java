package dev.artemisrdma.transport.flow;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayDeque;
import java.util.Random;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.wire.FrameHeader;

class CreditWindowTest {

    @Test
    void lastCreditOnlyGoesWithReturnedCredit() throws Exception {
        CreditWindow w = new CreditWindow(4);
        w.grant(2);
        assertTrue(w.maySendData());
        assertEquals(0, w.spend());
        assertFalse(w.maySendData(), "the last credit must carry credit back");
        assertFalse(w.creditFrameDue());
        w.reposted(1);
        assertTrue(w.maySendData());
        assertFalse(w.creditFrameDue(), "below threshold");
        assertEquals(1, w.spend());
        assertEquals(0, w.sendCredits());
        assertEquals(0, w.owed());
    }

    @Test
    void pausedWindowKeepsCreditBack() throws Exception {
        CreditWindow w = new CreditWindow(1);
        w.grant(5);
        w.reposted(3);
        w.setReturning(false);
        assertEquals(0, w.returnable());
        assertFalse(w.creditFrameDue());
        assertEquals(0, w.spend());
        w.setReturning(true);
        assertTrue(w.creditFrameDue());
        assertEquals(3, w.spend());
    }

    @Test
    void creditsInOneHeaderAreCapped() throws Exception {
        CreditWindow w = new CreditWindow(1);
        w.grant(2);
        w.reposted(70000);
        assertEquals(FrameHeader.MAX_CREDITS, w.spend());
        assertEquals(70000 - FrameHeader.MAX_CREDITS, w.owed());
    }

    /**
     * Two peers, each offering {@code slots} receives (credits + the reserve), exchange frames under random
     * interleavings of sends and arrivals. Both must always finish: never both stuck at zero credit with credit
     * owed, never a send without a credit (which would be an RNR on the wire).
     */
    @Test
    void bothSidesNeverDeadlockUnderRandomInterleavings() throws Exception {
        long seed = System.nanoTime();
        Random rnd = new Random(seed);
        try {
            for (int run = 0; run < 3000; run++) {
                int receiveSlots = 1 + rnd.nextInt(4);
                int threshold = 1 + rnd.nextInt(receiveSlots);
                int toSendA = rnd.nextInt(40);
                int toSendB = rnd.nextBoolean() ? 0 : rnd.nextInt(40); // one-way traffic half the time
                simulate(rnd, receiveSlots + 1, threshold, toSendA, toSendB);
            }
        } catch (AssertionError e) {
            throw new AssertionError("seed " + seed + ": " + e.getMessage(), e);
        }
    }

    private static final class Side {
        final CreditWindow w;
        final ArrayDeque<Integer> inbound = new ArrayDeque<>(); // credits carried by each SEND in flight to us
        int posted;
        int consumed;
        int toSend;
        int received;

        Side(int slots, int threshold, int toSend) throws FabricException {
            w = new CreditWindow(threshold);
            w.limit(slots); // a legal run never trips the bound
            w.grant(slots); // the peer's initial credits: all it posted
            posted = slots;
            this.toSend = toSend;
        }
    }

    private static void simulate(Random rnd, int slots, int threshold, int toSendA, int toSendB)
            throws FabricException {
        Side a = new Side(slots, threshold, toSendA);
        Side b = new Side(slots, threshold, toSendB);
        int expectA = toSendA;
        int expectB = toSendB;
        for (int step = 0; step < 100_000; step++) {
            boolean progressed = false;
            // try the possible actions in random order; stop when none is possible
            int[] order = {0, 1, 2, 3, 4, 5};
            for (int i = 5; i > 0; i--) {
                int j = rnd.nextInt(i + 1);
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
            for (int action : order) {
                Side me = action % 2 == 0 ? a : b;
                Side peer = me == a ? b : a;
                if (action >= 4) {
                    // the completion loop reposts a batch of consumed receives, and only then owes their credit
                    if (me.consumed > 0) {
                        me.posted += me.consumed;
                        me.w.reposted(me.consumed);
                        me.consumed = 0;
                        progressed = true;
                        break;
                    }
                } else if (action < 2) {
                    if (send(me, peer)) {
                        progressed = true;
                        break;
                    }
                } else if (!me.inbound.isEmpty()) {
                    // a SEND arrives: consumes a posted receive and grants the credit its header carries
                    assertTrue(me.posted > 0, "SEND arrived with no receive posted (RNR)");
                    me.posted--;
                    me.consumed++;
                    me.w.grant(me.inbound.poll());
                    progressed = true;
                    break;
                }
            }
            if (a.toSend == 0 && b.toSend == 0 && a.inbound.isEmpty() && b.inbound.isEmpty()
                    && a.consumed == 0 && b.consumed == 0) {
                assertEquals(expectB, a.received, "frames received by a");
                assertEquals(expectA, b.received, "frames received by b");
                return;
            }
            if (!progressed) {
                fail("deadlock: a credits " + a.w.sendCredits() + " owed " + a.w.owed() + " to send " + a.toSend
                        + "; b credits " + b.w.sendCredits() + " owed " + b.w.owed() + " to send " + b.toSend
                        + " (slots " + slots + ", threshold " + threshold + ")");
            }
        }
        fail("no completion after 100000 steps");
    }

    /** The channel's send decision: data if allowed, else a credit frame when one is due. */
    private static boolean send(Side me, Side peer) {
        if (me.toSend > 0 && me.w.maySendData()) {
            me.toSend--;
            peer.inbound.add(me.w.spend());
            peer.received++;
            return true;
        }
        if (me.w.creditFrameDue()) {
            peer.inbound.add(me.w.spend());
            return true;
        }
        return false;
    }
}
