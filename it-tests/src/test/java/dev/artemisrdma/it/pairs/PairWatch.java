package dev.artemisrdma.it.pairs;

import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiPredicate;

import org.apache.activemq.artemis.api.core.TransportConfiguration;
import org.apache.activemq.artemis.api.core.client.TopologyMember;

/** Both brokers' reports every ~250 ms and the client's topology, as a timeline of changes. */
final class PairWatch implements Runnable {
    final WireReplicatedPair pair;
    final List<String> timeline = new CopyOnWriteArrayList<>();
    final Set<String> topologies = Collections.synchronizedSet(new LinkedHashSet<>());
    /** The primary's replication channels seen. */
    final Set<String> channels = Collections.synchronizedSet(new LinkedHashSet<>());
    /** Milliseconds after the pull when each condition was first seen (absent: never). */
    final Map<String, Long> firsts = new ConcurrentHashMap<>();
    final AtomicReference<Throwable> failure = new AtomicReference<>();
    private volatile boolean running = true;
    private volatile BiPredicate<Map<String, String>, Map<String, String>> done;
    volatile boolean ended;
    volatile long pulledAt;
    private Thread thread;

    PairWatch(WireReplicatedPair pair) {
        this.pair = pair;
    }

    void start() {
        pulledAt = System.nanoTime();
        thread = new Thread(this, pair.label + "-watch");
        thread.start();
    }

    /** Watches until {@code condition} holds after the cable is back (null: never) or {@code deadline}. */
    void until(BiPredicate<Map<String, String>, Map<String, String>> condition, long deadline)
            throws InterruptedException {
        done = condition;
        while (!ended && thread.isAlive() && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        running = false;
        thread.join(60_000);
    }

    @Override
    public void run() {
        String lastP = "";
        String lastB = "";
        try {
            while (running) {
                Map<String, String> p = pair.primary.report();
                long tp = (System.nanoTime() - pulledAt) / 1_000_000;
                Map<String, String> b = pair.backup.report();
                long tb = (System.nanoTime() - pulledAt) / 1_000_000;
                String sp = "active=" + p.get("active") + " replication=" + p.get("replication") + " channel="
                        + p.get("replicationChannel");
                String sb = "active=" + b.get("active") + " replicaSync=" + b.get("replicaSync") + " topology="
                        + b.get("topology");
                if (!sp.equals(lastP)) {
                    timeline.add(String.format("%6d ms primary %s", tp, sp));
                    lastP = sp;
                }
                if (!sb.equals(lastB)) {
                    timeline.add(String.format("%6d ms backup  %s", tb, sb));
                    lastB = sb;
                }
                if (p.get("replicationChannel") != null) {
                    channels.add(p.get("replicationChannel"));
                }
                first("primary replication none", tp, p.get("replication").equals("none"));
                first("primary inactive", tp, !p.get("active").equals("true"));
                first("backup active", tb, b.get("active").equals("true"));
                first("both active", tb, b.get("active").equals("true") && p.get("active").equals("true"));
                first("backup not in sync", tb, !b.get("replicaSync").equals("true"));
                for (TopologyMember m : pair.cf.getServerLocator().getTopology().getMembers()) {
                    topologies.add(m.getNodeId().substring(0, 8) + " primary " + host(m.getPrimary())
                            + " backup " + host(m.getBackup()));
                }
                BiPredicate<Map<String, String>, Map<String, String>> condition = done;
                if (condition != null && condition.test(p, b)) {
                    ended = true;
                    return;
                }
                Thread.sleep(250);
            }
        } catch (Throwable t) {
            failure.set(t);
            timeline.add("watch failed: " + t);
        }
    }

    private void first(String what, long millis, boolean now) {
        if (now) {
            firsts.putIfAbsent(what, millis);
        }
    }

    private static String host(TransportConfiguration tc) {
        return tc == null ? "-" : tc.getParams().get("host") + ":" + tc.getParams().get("port");
    }
}
