package dev.artemisrdma.transport.stats;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * One job: counters that the data path bumps and any thread may read (monitoring, tests, benchmarks), without a
 * fence per count. Each add is a plain read and a release store, which on x86 is a plain store; a {@code volatile}
 * field's {@code ++} costs a full fence (a locked instruction) per count instead, and a message passed several such
 * counters on each side (about ten fences a round trip per side). Readers use an acquire load and see each
 * counter's latest published value, not one instant of all of them (as with volatile fields).
 *
 * <p>Owner: one writer at a time per counter, never two at once (an add is not atomic): a single thread (a
 * completion loop's own counters), or whoever holds the lock that guards the writes (a channel's send side). Readers:
 * any thread, no lock.
 */
public final class PublishedCounters {

    private static final VarHandle VALUE = MethodHandles.arrayElementVarHandle(long[].class);

    private final long[] values;

    /** {@code count} counters, numbered from 0, all 0. */
    public PublishedCounters(int count) {
        this.values = new long[count];
    }

    /** The writer: adds {@code n} (negative to take back what was counted ahead) to {@code counter}. */
    public void add(int counter, long n) {
        VALUE.setRelease(values, counter, values[counter] + n);
    }

    /** The writer: adds one to {@code counter}. */
    public void increment(int counter) {
        add(counter, 1);
    }

    /** Any thread: {@code counter}'s latest published value. */
    public long get(int counter) {
        return (long) VALUE.getAcquire(values, counter);
    }
}
