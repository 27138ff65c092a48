package dev.artemisrdma.transport.fabric;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.event.Level;

/**
 * One log site that a remote peer can trigger at will (a rejected handshake, a lost connection): at most
 * {@link #LINES} lines each {@link #INTERVAL_SECONDS} s, and for the lines it held back one summary line, "WHAT: ...
 * and N more like it in the last S s", at the same level, when the next line passes after the interval or when
 * {@link #flushAll} (the transport's timer calls it once a second) finds the interval over. So a flood of bad peers costs the
 * log at most {@code LINES + 1} lines per site per interval, and the operator still sees how many there were.
 *
 * <p>The limit is per site, not per peer: a map keyed by peer would grow with the attack. The first lines of each
 * interval name their peers; the summary counts the rest. Thread-safe; a line held back costs a lock and two
 * increments, and the caller formats nothing: {@code if (SITE.admit()) LOG.warn(...)}. No thread of its own.
 */
public final class LogLimiter {

    /** Lines a site may log per interval before it summarises. */
    public static final int LINES = 10;
    public static final long INTERVAL_SECONDS = 10;

    /** Every site made, for {@link #flushAll}; sites are static fields, so this stays small. */
    private static final List<LogLimiter> SITES = new CopyOnWriteArrayList<>();

    private final Logger log;
    private final Level level;
    private final String what;
    private final int lines;
    private final long intervalNanos;
    private final LongSupplier clock;
    private long intervalStart;
    private int passed;
    private long held;
    private long heldTotal;

    /** A site of {@code log} at {@code level}; {@code what} names its lines in the summary. */
    public static LogLimiter site(Logger log, Level level, String what) {
        LogLimiter site = new LogLimiter(log, level, what, LINES, TimeUnit.SECONDS.toNanos(INTERVAL_SECONDS),
                System::nanoTime);
        SITES.add(site);
        return site;
    }

    /** Tests: a site with its own limit and clock, not flushed by {@link #flushAll}. */
    LogLimiter(Logger log, Level level, String what, int lines, long intervalNanos, LongSupplier clock) {
        this.log = log;
        this.level = level;
        this.what = what;
        this.lines = lines;
        this.intervalNanos = intervalNanos;
        this.clock = clock;
        this.intervalStart = clock.getAsLong();
    }

    /**
     * Whether the caller may log its line now; when not, the line is counted for the summary. A line that opens a
     * new interval first logs the summary of the last one.
     */
    public boolean admit() {
        long now = clock.getAsLong();
        long summary = 0;
        long span = 0;
        boolean admitted;
        synchronized (this) {
            if (now - intervalStart >= intervalNanos) {
                span = now - intervalStart;
                summary = beginInterval(now);
            }
            admitted = passed < lines;
            if (admitted) {
                passed++;
            } else {
                held++;
                heldTotal++;
            }
        }
        summarise(summary, span);
        return admitted;
    }

    /** Logs the summary of an interval that is over, if it held lines back. */
    void flush() {
        long now = clock.getAsLong();
        long summary;
        long span;
        synchronized (this) {
            if (held == 0 || now - intervalStart < intervalNanos) {
                return;
            }
            span = now - intervalStart;
            summary = beginInterval(now);
        }
        summarise(summary, span);
    }

    /** Flushes every site (the transport's timer, once a second). */
    public static void flushAll() {
        for (LogLimiter site : SITES) {
            site.flush();
        }
    }

    /**
     * Tests: every site starts a fresh interval now (logging what it held), so a test that expects a line is not
     * refused it because another test in the same JVM spent the site's lines within the interval.
     */
    static void restartAll() {
        for (LogLimiter site : SITES) {
            long summary;
            long span;
            synchronized (site) {
                long now = site.clock.getAsLong();
                span = now - site.intervalStart;
                summary = site.beginInterval(now);
            }
            site.summarise(summary, span);
        }
    }

    /** Under this site's lock: a new interval starts at {@code now}; returns the lines the last one held back. */
    private long beginInterval(long now) {
        long summary = held;
        intervalStart = now;
        passed = 0;
        held = 0;
        return summary;
    }

    /** Lines held back since the site was made (tests and monitoring). */
    synchronized long heldTotal() {
        return heldTotal;
    }

    private void summarise(long count, long spanNanos) {
        if (count > 0) {
            log.atLevel(level).log("{}: ... and {} more like it in the last {} s", what, count,
                    Math.max(1, Math.round(spanNanos / 1e9)));
        }
    }
}
