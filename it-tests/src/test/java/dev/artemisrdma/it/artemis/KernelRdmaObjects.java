package dev.artemisrdma.it.artemis;

import dev.artemisrdma.it.RdmaResources;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The RDMA kernel objects of the machine, as {@code rdma resource show <type>} lists them, one line per object:
 * counts of pd, cq, qp, cm_id and mr, and the bytes pinned by the memory regions that this JVM does not own.
 *
 * <p>The kernel names an object's owner by the id of the <em>thread</em> that created it ({@code pid} is
 * {@code task_pid_vnr} of that task, and is left out once the thread has exited), so objects cannot be summed per
 * process. This JVM's are those whose {@code pid} is one of its live threads; everything else (the broker process's,
 * and any of ours whose thread is gone) counts as the broker's: an upper bound, which is what a bound check needs.
 * {@code foreignQueuePairs} says what those queue pairs are, by state and creating thread's name ("RTR by
 * rdma-cm-events": an accepted handshake not finished; "RTS": established; "ERR": failed, not destroyed yet).
 */
record KernelRdmaObjects(Map<String, Integer> counts, Map<String, Integer> foreignCounts, long foreignRegisteredBytes,
                        String sample, Map<String, Integer> foreignQueuePairs) {

    private static final String[] TYPES = {"pd", "cq", "qp", "cm_id", "mr"};
    private static final Pattern PID = Pattern.compile("\\bpid (\\d+)\\b");
    private static final Pattern MRLEN = Pattern.compile("\\bmrlen (\\d+)\\b");
    private static final Pattern STATE = Pattern.compile("\\bstate (\\S+)");
    private static final Pattern COMM = Pattern.compile("\\bcomm \\[?([^\\]\\s]+)");

    static KernelRdmaObjects now() {
        Set<Long> ours = ourThreads();
        Map<String, Integer> counts = new TreeMap<>();
        Map<String, Integer> foreignCounts = new TreeMap<>();
        long foreign = 0;
        String sample = "";
        Map<String, Integer> foreignQueuePairs = new TreeMap<>();
        for (String type : TYPES) {
            int n = 0;
            int notOurs = 0;
            for (String line : RdmaResources.run("rdma", "resource", "show", type).split("\n")) {
                if (line.isBlank()) {
                    continue;
                }
                n++;
                Matcher pid = PID.matcher(line);
                boolean foreignLine = !pid.find() || !ours.contains(Long.parseLong(pid.group(1)));
                if (foreignLine) {
                    notOurs++;
                    if (type.equals("qp")) {
                        foreignQueuePairs.merge(describe(line), 1, Integer::sum);
                    }
                }
                if (!type.equals("mr")) {
                    continue;
                }
                Matcher len = MRLEN.matcher(line);
                if (!len.find()) {
                    throw new IllegalStateException("'rdma resource show mr' printed no mrlen: " + line);
                }
                if (foreignLine) {
                    foreign += Long.parseLong(len.group(1));
                    sample = line.trim();
                }
            }
            counts.put(type, n);
            foreignCounts.put(type, notOurs);
        }
        return new KernelRdmaObjects(counts, foreignCounts, foreign, sample, foreignQueuePairs);
    }

    /** A queue pair's line as "state by thread" ("RTR by rdma-cm-events"), to say what a count is made of. */
    private static String describe(String qpLine) {
        Matcher state = STATE.matcher(qpLine);
        Matcher comm = COMM.matcher(qpLine);
        return (state.find() ? state.group(1) : "?") + " by " + (comm.find() ? comm.group(1) : "?");
    }

    /** The objects connections own (qp, cm_id, cq) and the protection domains; memory regions are compared apart. */
    Map<String, Integer> connectionObjects() {
        Map<String, Integer> objects = new TreeMap<>(counts);
        objects.remove("mr");
        return objects;
    }

    /** Objects of {@code type} not created by a live thread of this JVM: the broker's (an upper bound). */
    int foreign(String type) {
        return foreignCounts.get(type);
    }

    int memoryRegions() {
        return counts.get("mr");
    }

    private static Set<Long> ourThreads() {
        Set<Long> ids = new HashSet<>();
        try (Stream<Path> tasks = Files.list(Path.of("/proc/self/task"))) {
            tasks.forEach(t -> ids.add(Long.parseLong(t.getFileName().toString())));
        } catch (IOException e) {
            throw new IllegalStateException("cannot list this JVM's threads in /proc/self/task", e);
        }
        return ids;
    }

    /** Equal counts and foreign bytes (the sample line is not compared). */
    boolean sameAs(KernelRdmaObjects other) {
        return counts.equals(other.counts) && foreignRegisteredBytes == other.foreignRegisteredBytes;
    }

    @Override
    public String toString() {
        return counts + ", " + foreignRegisteredBytes + " bytes registered outside this JVM";
    }
}
