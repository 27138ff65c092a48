package dev.artemisrdma.transport.fabric;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * Brings back a listener whose device went away (device removal, address change): it retries bind and listen every
 * {@link #RETRY_MILLIS} ms until they succeed, so clients can connect again once the device is back, without a
 * broker restart. Logged once when lost (ERROR) and once when back (INFO); failed attempts only at debug.
 * For fabric implementations; thread-safe.
 */
public final class ListenerRecovery {

    /** How often a lost listener tries to bind and listen again. */
    public static final long RETRY_MILLIS = 1000;

    private static final Logger LOG = LoggerFactory.getLogger(ListenerRecovery.class);

    /** Binds and listens again; throws while the device (or the address) is not back. */
    @FunctionalInterface
    public interface Rebind {
        void rebind() throws FabricException;
    }

    private final String what;
    private final ScheduledExecutorService timer;
    private final Rebind rebind;
    private ScheduledFuture<?> retries;
    private boolean lost;
    private boolean cancelled;
    private long lostAtNanos;
    private int attempts;
    private String lastFailure = "";

    public ListenerRecovery(String what, ScheduledExecutorService timer, Rebind rebind) {
        this.what = what;
        this.timer = timer;
        this.rebind = rebind;
    }

    /** The listener is gone: start retrying (no-op while already retrying, or once cancelled). */
    public synchronized void lost(String reason) {
        if (lost || cancelled) {
            return;
        }
        lost = true;
        lostAtNanos = System.nanoTime();
        attempts = 0;
        LOG.error("{} lost: {}; it no longer accepts connections and retries bind+listen every {} ms until the "
                + "device is back", what, reason, RETRY_MILLIS);
        retries = timer.scheduleWithFixedDelay(this::attempt, RETRY_MILLIS, RETRY_MILLIS, TimeUnit.MILLISECONDS);
    }

    /** Tries at once (a port came up), besides the periodic attempts. */
    public void retryNow() {
        synchronized (this) {
            if (!lost || cancelled) {
                return;
            }
        }
        try {
            timer.execute(this::attempt);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // the fabric is closing
        }
    }

    private synchronized void attempt() {
        if (!lost || cancelled) {
            return;
        }
        attempts++;
        try {
            rebind.rebind();
        } catch (FabricException | RuntimeException e) {
            lastFailure = e.getMessage();
            LOG.debug("{}: bind+listen attempt {} failed: {}", what, attempts, lastFailure);
            return;
        }
        lost = false;
        retries.cancel(false);
        LOG.info("{} is back after {} ms ({} attempt(s)); it accepts connections again", what,
                TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - lostAtNanos), attempts);
    }

    public synchronized boolean isLost() {
        return lost;
    }

    /** Stops retrying (the listener is being closed). */
    public synchronized void cancel() {
        cancelled = true;
        if (retries != null) {
            retries.cancel(false);
        }
    }
}
