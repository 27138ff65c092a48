package dev.artemisrdma.transport.flow;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The heap that all connections of one transport may hold for frames being reassembled ({@code reassemblyMemory}).
 * Each connection reserves what its reassembly buffer really grows to and gives it back when the buffer goes. Thread
 * safe: the completion loops of every device draw on one budget.
 */
public final class ReassemblyBudget {

    private final long limit;
    private final AtomicLong used = new AtomicLong();

    public ReassemblyBudget(long limit) {
        this.limit = limit;
    }

    /** Takes {@code bytes}; false (and nothing taken) when that would exceed the limit. */
    boolean tryReserve(long bytes) {
        while (true) {
            long now = used.get();
            if (now + bytes > limit) {
                return false;
            }
            if (used.compareAndSet(now, now + bytes)) {
                return true;
            }
        }
    }

    void release(long bytes) {
        used.addAndGet(-bytes);
    }

    public long used() {
        return used.get();
    }

    long limit() {
        return limit;
    }
}
