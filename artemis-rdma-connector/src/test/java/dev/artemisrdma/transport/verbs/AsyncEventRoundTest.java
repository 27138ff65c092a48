package dev.artemisrdma.transport.verbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.fabric.LogCapture;
import dev.artemisrdma.transport.fabric.LogLimiter;
import dev.artemisrdma.verbs.IbvAsyncEvent;
import dev.artemisrdma.verbs.IbvEventType;
import dev.artemisrdma.verbs.VerbsException;

/**
 * The async-event thread's round, each part contained. Before, the whole round sat in one try: an event whose handling
 * threw dropped the events after it, and a failed read skipped the rescan and the deferred destroys, with a WARN
 * every 100 ms for as long as it failed.
 */
class AsyncEventRoundTest {

    private static IbvAsyncEvent event(int port) {
        return new IbvAsyncEvent(null, IbvEventType.PORT_ACTIVE, 0, port, -1, 0, 0);
    }

    @Test
    void anEventWhoseHandlingFailsDoesNotCostTheOthers() {
        List<Integer> handled = new ArrayList<>();
        boolean polled = AsyncEventRound.readAndDispatch((timeout, failures) -> List.of(event(1), event(2), event(3)),
                0, e -> {
                    if (e.portNumber() == 1) {
                        throw new IllegalStateException("a handler bug");
                    }
                    handled.add(e.portNumber());
                });
        assertTrue(polled);
        assertEquals(List.of(2, 3), handled);
    }

    @Test
    void aFailingPollNeitherSkipsTheRescanNorFloodsTheLog() {
        AtomicInteger rescans = new AtomicInteger();
        AtomicInteger destroys = new AtomicInteger();
        int rounds = 5 * LogLimiter.LINES;
        try (LogCapture log = new LogCapture()) {
            for (int i = 0; i < rounds; i++) {
                boolean polled = AsyncEventRound.readAndDispatch((timeout, failures) -> {
                    throw new VerbsException("poll", 9, "on the async event fds");
                }, 0, e -> { });
                assertFalse(polled, "the caller pauses");
                AsyncEventRound.contained("rescanning the RDMA devices", () -> {
                    rescans.incrementAndGet();
                    throw new VerbsException("a rescan that fails too");
                });
                AsyncEventRound.contained("destroying what waited for a port", destroys::incrementAndGet);
            }
            assertEquals(rounds, rescans.get());
            assertEquals(rounds, destroys.get(), "a failed rescan does not skip the deferred destroys");
            // at most two intervals' worth, should the first end during the loop
            assertTrue(log.count("reading device events") <= 2 * LogLimiter.LINES, "one line a round is a flood");
            assertTrue(log.count("rescanning the RDMA devices failed") <= 2 * LogLimiter.LINES);
        }
    }
}
