package dev.artemisrdma.transport.verbs;

import dev.artemisrdma.transport.fabric.LogLimiter;
import dev.artemisrdma.verbs.AsyncEventReader;
import dev.artemisrdma.verbs.IbvAsyncEvent;
import dev.artemisrdma.verbs.VerbsException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

import java.util.List;
import java.util.function.Consumer;

/**
 * The parts of one round of {@link VerbsFabric}'s async-event thread, each contained so that a failure costs only its
 * own part: reading (a device whose read fails is reported on its own, and the events read from the others still
 * come), the dispatch of each event, and each step of the rescan (the device list, the deferred destroys). Their
 * failures are logged through {@link LogLimiter}s: a device, or a poll(2), that fails on every round cannot fill the
 * log.
 */
final class AsyncEventRound {

    private static final Logger LOG = LoggerFactory.getLogger(VerbsFabric.class);
    private static final LogLimiter POLL_FAILED = LogLimiter.site(LOG, Level.WARN, "failed polls of device events");
    private static final LogLimiter READ_FAILED = LogLimiter.site(LOG, Level.WARN, "failed reads of device events");
    private static final LogLimiter DISPATCH_FAILED = LogLimiter.site(LOG, Level.ERROR,
            "device events whose handling failed");
    private static final LogLimiter STEP_FAILED = LogLimiter.site(LOG, Level.WARN, "failed device rescans");

    /** Where the events come from: {@link AsyncEventReader#poll}. */
    interface Source {
        List<IbvAsyncEvent> poll(int timeoutMillis, Consumer<AsyncEventReader.ReadFailure> failures)
                throws VerbsException;
    }

    /** A step of the rescan. */
    interface Step {
        void run() throws VerbsException;
    }

    private AsyncEventRound() {
    }

    /**
     * Reads what came within {@code timeoutMillis} and dispatches each event on its own; returns false when poll(2)
     * itself failed (the caller pauses before the next round, and still rescans).
     */
    static boolean readAndDispatch(Source source, int timeoutMillis, Consumer<IbvAsyncEvent> dispatch) {
        List<IbvAsyncEvent> events;
        try {
            events = source.poll(timeoutMillis, AsyncEventRound::readFailed);
        } catch (VerbsException | RuntimeException e) {
            if (POLL_FAILED.admit()) {
                LOG.warn("reading device events: {}", e.toString());
            }
            return false;
        }
        for (IbvAsyncEvent event : events) {
            try {
                dispatch.accept(event);
            } catch (RuntimeException e) {
                if (DISPATCH_FAILED.admit()) {
                    LOG.error("handling the device event {} failed", event, e);
                }
            }
        }
        return true;
    }

    /** Runs one step of the rescan; a failure is logged and the caller goes on with the next. */
    static void contained(String what, Step step) {
        try {
            step.run();
        } catch (VerbsException | RuntimeException e) {
            if (STEP_FAILED.admit()) {
                LOG.warn("{} failed: {}", what, e.toString());
            }
        }
    }

    /**
     * A device's events could not be read: the first failure in a row is logged, the later ones only counted, and the
     * one that gives the device up says so once, with the count.
     */
    static void readFailed(AsyncEventReader.ReadFailure f) {
        String device = f.device() == null ? "?" : f.device().name();
        if (f.unwatched()) {
            LOG.error("RDMA device {}: reading its async events failed {} times in a row (last: {}); no longer read, "
                    + "so port and device errors there fail connections only through their queue pairs and rdma_cm",
                    device, f.inARow(), f.error().toString());
        } else if (f.inARow() == 1 && READ_FAILED.admit()) {
            LOG.warn("RDMA device {}: reading its async events failed: {}; the other devices are read as before",
                    device, f.error().toString());
        }
    }
}
