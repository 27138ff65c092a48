package dev.artemisrdma.transport.fabric;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Connection requests waiting to be handled, one queue per source, served in rounds: each round takes the oldest
 * request of every source that has one. A host that floods the listener thus delays another host's request by one
 * of its own, not by its whole backlog; rdma_cm's event thread reads every ready event into these queues before it
 * handles any, so the kernel's listen backlog does not fill and drop first copies (a dropped request waits for
 * rdma_cm's retry, about 4 s). A source with {@code maxPerSource} requests waiting, or all sources together with
 * {@code maxTotal}, get the next one refused unread: {@link #offer} says so. Owned by one thread (rdma_cm's event
 * thread): not thread safe.
 *
 * @param <K> what names a source (a host's address)
 * @param <R> a request
 */
public final class FairRequestQueue<K, R> {

    private final int maxPerSource;
    private final int maxTotal;
    private final Map<K, ArrayDeque<R>> bySource = new LinkedHashMap<>();
    private int total;

    public FairRequestQueue(int maxPerSource, int maxTotal) {
        if (maxPerSource < 1 || maxTotal < maxPerSource) {
            throw new IllegalArgumentException("maxPerSource " + maxPerSource + ", maxTotal " + maxTotal);
        }
        this.maxPerSource = maxPerSource;
        this.maxTotal = maxTotal;
    }

    /** Queues {@code request} from {@code source}; false (nothing queued) when its source or the queue is full. */
    public boolean offer(K source, R request) {
        ArrayDeque<R> queue = bySource.get(source);
        if (total >= maxTotal || (queue != null && queue.size() >= maxPerSource)) {
            return false;
        }
        if (queue == null) {
            queue = new ArrayDeque<>();
            bySource.put(source, queue);
        }
        queue.add(request);
        total++;
        return true;
    }

    /** The next round: the oldest request of each source that has one, in the order the sources first came. */
    public List<R> round() {
        List<R> round = new ArrayList<>(bySource.size());
        for (Iterator<ArrayDeque<R>> it = bySource.values().iterator(); it.hasNext(); ) {
            ArrayDeque<R> queue = it.next();
            round.add(queue.poll());
            if (queue.isEmpty()) {
                it.remove(); // a source with nothing waiting goes to the back when it comes again
            }
        }
        total -= round.size();
        return round;
    }

    /** Requests of {@code source} waiting now. */
    public int waiting(K source) {
        ArrayDeque<R> queue = bySource.get(source);
        return queue == null ? 0 : queue.size();
    }

    public boolean isEmpty() {
        return total == 0;
    }

    public int size() {
        return total;
    }

    /** Takes every request still waiting (to refuse them at shutdown). */
    public List<R> drain() {
        List<R> all = new ArrayList<>(total);
        bySource.values().forEach(all::addAll);
        bySource.clear();
        total = 0;
        return all;
    }
}
