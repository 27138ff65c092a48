package dev.artemisrdma.verbs;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads the async events of the devices poll(2) found ready, one device at a time, so that a device whose read fails
 * costs only itself: the events already read, from it and from the others, are kept, and the others are still read.
 * A device that fails {@link #GIVE_UP_AFTER} reads in a row (a read that throws, or a device reported ready that has
 * no event, as with POLLERR or POLLNVAL) is given up: its caller stops watching it, so it cannot make the thread spin.
 * A read that brings an event clears the count. Used by one thread at a time (under {@link AsyncEventReader}'s lock).
 *
 * @param <D> the device (an {@link RdmaDevice}; anything in tests)
 */
final class DeviceReads<D> {

    /** Failed reads in a row after which a device is no longer read. */
    static final int GIVE_UP_AFTER = 5;

    /** Appends every event {@code device} has now to {@code out}; returns how many. */
    interface Reader<D> {
        int readAll(D device, List<IbvAsyncEvent> out) throws VerbsException;
    }

    /** A read that failed: the device, why, how many reads of it failed in a row, and whether it is given up. */
    record Failure<D>(D device, Exception error, int inARow, boolean givenUp) {
    }

    private final Map<D, Integer> inARow = new HashMap<>();

    /** Reads each of {@code ready} into {@code out}; returns the reads that failed (empty when none did). */
    List<Failure<D>> read(List<D> ready, Reader<D> reader, List<IbvAsyncEvent> out) {
        List<Failure<D>> failures = List.of();
        for (D device : ready) {
            Exception error;
            try {
                if (reader.readAll(device, out) > 0) {
                    inARow.remove(device);
                    continue;
                }
                error = new VerbsException("poll(2) reported the async event fd ready, but it had no event");
            } catch (VerbsException | RuntimeException e) {
                error = e;
            }
            int n = inARow.merge(device, 1, Integer::sum);
            boolean givenUp = n >= GIVE_UP_AFTER;
            if (givenUp) {
                inARow.remove(device);
            }
            if (failures.isEmpty()) {
                failures = new ArrayList<>();
            }
            failures.add(new Failure<>(device, error, n, givenUp));
        }
        return failures;
    }

    /** {@code device} is no longer watched: its count goes. */
    void forget(D device) {
        inARow.remove(device);
    }
}
