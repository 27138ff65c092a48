package dev.artemisrdma.transport.loop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import org.junit.jupiter.api.Test;

/**
 * The mailbox's rule: whoever marks it queued sees its requests run, it is never queued twice, and no request is
 * lost between threads that ask and the thread that takes (the loop's inbox stands here as a queue of its own).
 */
class MailboxTest {

    @Test
    void theFirstAskQueuesItAndLaterAsksJoinIt() {
        Mailbox m = new Mailbox(null);
        assertFalse(m.pending());
        assertTrue(m.add(1), "the first ask queues the mailbox");
        assertFalse(m.add(4), "a second ask finds it queued");
        assertFalse(m.add(1), "the same request twice is one request");
        assertTrue(m.pending());
        assertEquals(5, m.take(), "the loop ahead of the inbox takes the requests");
        assertFalse(m.add(2), "still in the inbox: an ask joins it there");
        assertEquals(2, m.takeAll());
        assertFalse(m.pending());
        assertTrue(m.add(8), "out of the inbox: the next ask queues it again");
        assertEquals(8, m.take(), "only what was asked");
        assertThrows(IllegalArgumentException.class, () -> m.add(0));
        assertThrows(IllegalArgumentException.class, () -> m.add(1 << 31));
    }

    /**
     * Each asking thread asks its own request again only once the taker has run it; a request lost between them
     * leaves that thread waiting (the test times out), and a mailbox queued twice is seen in the queue twice.
     */
    @Test
    void manyThreadsAskingOneTakerLoseNothingAndQueueItOnce() throws Exception {
        int threads = 4;
        int rounds = 20_000;
        Mailbox m = new Mailbox(null);
        ConcurrentLinkedQueue<Mailbox> inbox = new ConcurrentLinkedQueue<>();
        AtomicInteger inInbox = new AtomicInteger();
        AtomicInteger queuedTwice = new AtomicInteger();
        AtomicIntegerArray ran = new AtomicIntegerArray(threads);
        AtomicBoolean done = new AtomicBoolean();
        Thread taker = new Thread(() -> {
            while (!done.get() || !inbox.isEmpty()) {
                Mailbox q = inbox.poll();
                if (q == null) {
                    Thread.onSpinWait();
                    continue;
                }
                inInbox.decrementAndGet();
                int requests = q.takeAll();
                for (int t = 0; t < threads; t++) {
                    if ((requests & (1 << t)) != 0) {
                        ran.incrementAndGet(t);
                    }
                }
            }
        }, "taker");
        taker.start();
        List<Thread> askers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int me = t;
            Thread asker = new Thread(() -> {
                for (int i = 1; i <= rounds; i++) {
                    if (m.add(1 << me)) {
                        if (inInbox.incrementAndGet() > 1) {
                            queuedTwice.incrementAndGet();
                        }
                        inbox.add(m);
                    }
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                    while (ran.get(me) < i) {
                        if (System.nanoTime() > deadline) {
                            return; // lost: the count below says so
                        }
                        Thread.onSpinWait();
                    }
                }
            }, "asker-" + t);
            askers.add(asker);
            asker.start();
        }
        for (Thread asker : askers) {
            asker.join(60_000);
        }
        done.set(true);
        taker.join(10_000);
        for (int t = 0; t < threads; t++) {
            assertEquals(rounds, ran.get(t), "requests of asker " + t + " run");
        }
        assertEquals(0, queuedTwice.get(), "the mailbox was queued while it was queued");
        assertFalse(m.pending());
    }
}
