package dev.artemisrdma.it.pairs;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;

import dev.artemisrdma.it.Lab;
import dev.artemisrdma.it.RdmaResources;

/** The RDMA resource baseline of a pairs lab test, and the check that the brokers left nothing behind. */
final class PairsLab {

    private PairsLab() {
    }

    /** The counts once this JVM's librdmacm state exists on both lab devices (its clients reach brokers on both). */
    static RdmaResources baseline() throws Exception {
        return RdmaResources.afterWarmUp(Lab.addr1(), Lab.addr0());
    }

    /** The kernel's counts are back to {@code baseline} (bounded wait); on failure, which process holds what. */
    static void assertResourcesBack(RdmaResources baseline) throws Exception {
        RdmaResources after = RdmaResources.awaitEqual(baseline, 30_000);
        if (!after.equals(baseline)) {
            assertEquals(baseline, after, "RDMA resources left behind (this JVM is pid " + ProcessHandle.current()
                    .pid() + "):\n" + show("pd") + show("qp"));
        }
    }

    /**
     * Not one connection attempt of the brokers' own links went through Netty's connector (not even a first attempt
     * made before the broker plugins ran): read from each broker's log of every attempt.
     */
    static void assertNoNettyAttempt(PairBroker... brokers) {
        for (PairBroker broker : brokers) {
            assertEquals(0, broker.nettyAttempts(), "broker " + broker + " tried Netty TCP for its links: "
                    + broker.firstNettyAttempts());
        }
    }

    /** A check of one received message (its body, say); throws when the message is wrong. */
    @FunctionalInterface
    interface MessageCheck {
        void check(jakarta.jms.Message message) throws Exception;
    }

    /**
     * Receives from {@code consumer} until {@code count} distinct {@code seq} properties arrived (at most 180 s, each
     * wait 30 s), each message passing {@code check}, then 2 s more: a {@code seq} seen twice, then or later, goes to
     * {@code duplicates}.
     */
    static void receiveEachOnce(jakarta.jms.MessageConsumer consumer, int count, java.util.Set<Integer> received,
                                java.util.List<Integer> duplicates, MessageCheck check) throws Exception {
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(180);
        jakarta.jms.Message m;
        while (received.size() < count && System.nanoTime() < deadline && (m = consumer.receive(30_000)) != null) {
            check.check(m);
            if (!received.add(m.getIntProperty("seq"))) {
                duplicates.add(m.getIntProperty("seq"));
            }
        }
        while ((m = consumer.receive(2_000)) != null) { // nothing beyond: no late duplicate
            duplicates.add(m.getIntProperty("seq"));
        }
    }

    /** Deletes a test's broker data directory (best effort: a broker that did not stop may still hold files). */
    static void deleteTree(java.nio.file.Path dir) {
        try (java.util.stream.Stream<java.nio.file.Path> paths = java.nio.file.Files.walk(dir)) {
            paths.sorted(java.util.Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
        } catch (java.io.IOException | java.io.UncheckedIOException e) {
            System.out.println("could not delete " + dir + ": " + e);
        }
    }

    private static String show(String kind) throws Exception {
        Process p = new ProcessBuilder("rdma", "resource", "show", kind).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        p.waitFor();
        return out;
    }
}
