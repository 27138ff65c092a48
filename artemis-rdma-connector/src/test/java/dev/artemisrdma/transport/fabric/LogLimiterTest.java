package dev.artemisrdma.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

class LogLimiterTest {

    private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

    @Test
    void atMostTheLimitPerIntervalThenOneSummaryWhenTheNextLinePasses() {
        AtomicLong now = new AtomicLong(1_000 * SECOND);
        LogLimiter site = new LogLimiter(LoggerFactory.getLogger(LogLimiterTest.class), Level.WARN,
                "flood-site-a", 3, 10 * SECOND, now::get);
        try (LogCapture log = new LogCapture()) {
            int passed = 0;
            for (int i = 0; i < 1237; i++) {
                if (site.admit()) {
                    passed++;
                }
            }
            assertEquals(3, passed);
            assertEquals(1234, site.heldTotal());
            assertEquals(0, log.count("more like it"), "no summary before the interval is over");
            now.addAndGet(10 * SECOND);
            assertTrue(site.admit(), "a new interval: lines pass again");
            assertEquals(1, log.count("flood-site-a: ... and 1234 more like it in the last 10 s"));
            site.flush();
            assertEquals(1, log.count("more like it"), "the summary is written once");
        }
    }

    @Test
    void anIntervalThatEndsQuietlyIsSummarisedByTheFlush() {
        AtomicLong now = new AtomicLong(0);
        LogLimiter site = new LogLimiter(LoggerFactory.getLogger(LogLimiterTest.class), Level.INFO,
                "flood-site-b", 2, 10 * SECOND, now::get);
        try (LogCapture log = new LogCapture()) {
            for (int i = 0; i < 7; i++) {
                site.admit();
            }
            site.flush();
            assertEquals(0, log.count("flood-site-b: ..."), "the interval is not over yet");
            now.addAndGet(12 * SECOND);
            site.flush();
            assertEquals(1, log.count("flood-site-b: ... and 5 more like it in the last 12 s"));
            now.addAndGet(30 * SECOND);
            site.flush();
            assertEquals(1, log.count("flood-site-b: ..."), "nothing held back, nothing to summarise");
        }
    }

    @Test
    void concurrentCallersShareOneLimit() throws Exception {
        AtomicLong now = new AtomicLong(0);
        LogLimiter site = new LogLimiter(LoggerFactory.getLogger(LogLimiterTest.class), Level.WARN,
                "flood-site-c", 10, 10 * SECOND, now::get);
        AtomicInteger passed = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
            Thread thread = new Thread(() -> {
                for (int i = 0; i < 10_000; i++) {
                    if (site.admit()) {
                        passed.incrementAndGet();
                    }
                }
            });
            threads.add(thread);
            thread.start();
        }
        for (Thread thread : threads) {
            thread.join();
        }
        assertEquals(10, passed.get());
        assertEquals(80_000 - 10, site.heldTotal());
        assertFalse(site.admit());
    }
}
