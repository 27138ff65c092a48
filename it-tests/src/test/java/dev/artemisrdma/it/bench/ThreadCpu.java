package dev.artemisrdma.it.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * CPU time of this process's threads, grouped by thread name, between two snapshots: which threads (broker, clients,
 * completion loops, Netty event loops) a workload kept busy. Numbers in names are folded ({@code Thread-#}), except
 * in the transport's own threads ({@code rdma-N-...}), where N tells one transport (the broker's) from another (the
 * clients'). A thread that ends between two snapshots is counted only if it reported itself with {@link
 * #recordEndingThread} (the benchmark's own producer and consumer threads do); others are lost, and the report shows
 * the process CPU they leave unattributed. Each group's kernel share (CPU minus user time: system calls, and on rxe
 * the software RoCE work a post or a poll does in the caller) is kept beside it.
 */
final class ThreadCpu {

    private static final com.sun.management.ThreadMXBean MX =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    private static final Map<String, LongAdder> ENDED = new ConcurrentHashMap<>();
    private static final Map<String, LongAdder> ENDED_KERNEL = new ConcurrentHashMap<>();

    private ThreadCpu() {
    }

    /** Called by a thread as it ends: its CPU time would otherwise vanish with it. */
    static void recordEndingThread() {
        long cpu = MX.getCurrentThreadCpuTime();
        long user = MX.getCurrentThreadUserTime();
        if (cpu > 0) {
            String g = group(Thread.currentThread().getName());
            ENDED.computeIfAbsent(g, k -> new LongAdder()).add(cpu);
            ENDED_KERNEL.computeIfAbsent(g, k -> new LongAdder()).add(Math.max(0, cpu - user));
        }
    }

    static String group(String name) {
        if (name.startsWith("rdma-")) {
            return name;
        }
        return name.replaceAll("@[0-9a-f]+", "@#").replaceAll("\\d+", "#");
    }

    static Snapshot snapshot() {
        long[] ids = MX.getAllThreadIds();
        long[] cpu = MX.getThreadCpuTime(ids);
        long[] user = MX.getThreadUserTime(ids);
        ThreadInfo[] infos = MX.getThreadInfo(ids, 0);
        Map<Long, Object[]> threads = new HashMap<>();
        for (int i = 0; i < ids.length; i++) {
            if (infos[i] != null && cpu[i] >= 0) {
                threads.put(ids[i], new Object[] {group(infos[i].getThreadName()), cpu[i],
                        Math.max(0, cpu[i] - Math.max(0, user[i]))});
            }
        }
        Map<String, Long> ended = new HashMap<>();
        ENDED.forEach((g, n) -> ended.put(g, n.sum()));
        Map<String, Long> endedKernel = new HashMap<>();
        ENDED_KERNEL.forEach((g, n) -> endedKernel.put(g, n.sum()));
        return new Snapshot(threads, ended, endedKernel, processCpuNanos(), ManagementFactory.getCompilationMXBean()
                .getTotalCompilationTime());
    }

    /** Per-thread CPU at one instant. */
    record Snapshot(Map<Long, Object[]> threads, Map<String, Long> ended, Map<String, Long> endedKernel,
                    long processNanos, long jitMillis) {

        Usage since(Snapshot before) {
            Map<String, Long> byGroup = new HashMap<>();
            Map<String, Long> kernel = new HashMap<>();
            threads.forEach((id, now) -> {
                Object[] then = before.threads.get(id);
                long delta = (Long) now[1] - (then == null ? 0 : (Long) then[1]);
                if (delta > 0) {
                    byGroup.merge((String) now[0], delta, Long::sum);
                    long k = (Long) now[2] - (then == null ? 0 : (Long) then[2]);
                    kernel.merge((String) now[0], Math.max(0, k), Long::sum);
                }
            });
            ended.forEach((g, n) -> {
                long delta = n - before.ended.getOrDefault(g, 0L);
                if (delta > 0) {
                    byGroup.merge(g, delta, Long::sum);
                    kernel.merge(g, Math.max(0, endedKernel.getOrDefault(g, 0L)
                            - before.endedKernel.getOrDefault(g, 0L)), Long::sum);
                }
            });
            return new Usage(byGroup, kernel, processNanos - before.processNanos, jitMillis - before.jitMillis);
        }
    }

    /**
     * CPU nanoseconds per thread group, the kernel's part of them ({@code kernelByGroup}), the whole process's over
     * the same time, and the time the JIT compilers spent meanwhile (their threads are not Java threads: part of
     * what is unattributed).
     */
    record Usage(Map<String, Long> byGroup, Map<String, Long> kernelByGroup, long processNanos, long jitMillis) {

        static Usage sum(List<Usage> all) {
            Map<String, Long> byGroup = new HashMap<>();
            Map<String, Long> kernel = new HashMap<>();
            long process = 0;
            long jit = 0;
            for (Usage u : all) {
                u.byGroup.forEach((g, n) -> byGroup.merge(g, n, Long::sum));
                u.kernelByGroup.forEach((g, n) -> kernel.merge(g, n, Long::sum));
                process += u.processNanos;
                jit += u.jitMillis;
            }
            return new Usage(byGroup, kernel, process, jit);
        }

        /** This usage with every group's name behind {@code prefix}. */
        Usage prefixed(String prefix) {
            Map<String, Long> byGroup = new HashMap<>();
            Map<String, Long> kernel = new HashMap<>();
            this.byGroup.forEach((g, n) -> byGroup.put(prefix + g, n));
            kernelByGroup.forEach((g, n) -> kernel.put(prefix + g, n));
            return new Usage(byGroup, kernel, processNanos, jitMillis);
        }

        long attributed() {
            return byGroup.values().stream().mapToLong(Long::longValue).sum();
        }

        /** The {@code n} busiest groups, busiest first. */
        List<Map.Entry<String, Long>> top(int n) {
            List<Map.Entry<String, Long>> entries = new ArrayList<>(byGroup.entrySet());
            entries.sort(Map.Entry.<String, Long>comparingByValue().reversed());
            return entries.subList(0, Math.min(n, entries.size()));
        }
    }

    /** The process's CPU time, all threads. */
    private static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }
}
