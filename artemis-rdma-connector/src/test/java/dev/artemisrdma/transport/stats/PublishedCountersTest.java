package dev.artemisrdma.transport.stats;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * The data path's counters: one writer at a time adds, any thread reads. A reader on another thread sees each
 * counter only grow while the writer counts, never a value the writer has not reached, and the writer's last value
 * once it is done; counters are independent of one another.
 */
class PublishedCountersTest {

    @Test
    void aReaderOnAnotherThreadSeesEachCounterGrowToTheWritersTotal() throws Exception {
        PublishedCounters counters = new PublishedCounters(2);
        int adds = 2_000_000;
        AtomicReference<String> wrong = new AtomicReference<>();
        Thread writer = new Thread(() -> {
            for (int i = 0; i < adds; i++) {
                counters.increment(0);
                counters.add(1, 3);
            }
        });
        writer.start();
        long lastFrames = 0;
        long lastBytes = 0;
        int reads = 0;
        while (writer.isAlive() || reads == 0) {
            long frames = counters.get(0);
            long bytes = counters.get(1);
            reads++;
            if (frames < lastFrames || bytes < lastBytes || frames > adds || bytes > 3L * adds || bytes % 3 != 0) {
                wrong.compareAndSet(null, "read " + frames + " / " + bytes + " after " + lastFrames + " / "
                        + lastBytes);
            }
            lastFrames = frames;
            lastBytes = bytes;
        }
        writer.join();
        assertEquals(null, wrong.get());
        assertTrue(reads > 0);
        assertEquals(adds, counters.get(0));
        assertEquals(3L * adds, counters.get(1));
    }

    @Test
    void aWriterTakesBackWhatItCountedAhead() {
        PublishedCounters counters = new PublishedCounters(3);
        counters.add(2, 5);
        counters.add(2, -2);
        assertEquals(3, counters.get(2));
        assertEquals(0, counters.get(0));
        assertEquals(0, counters.get(1));
    }
}
