package dev.artemisrdma.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The router's port-down grace on its own, with budgets of a few hundred milliseconds: a port that comes back in
 * time fails nothing, one that stays down fails its queue pairs once their budget is over (never before: the checks
 * are scheduled, not polled), and a port that goes down again gets a fresh budget. Bounds on lateness are generous:
 * the machine may be busy.
 */
class DeviceEventRouterTest {

    private static final Duration GRACE = Duration.ofMillis(400);
    /** How late a check may run on a loaded machine before the test calls it a failure. */
    private static final long SLACK_MILLIS = 5_000;

    private static DeviceEvent down(String device, int port) {
        return DeviceEvent.port(DeviceEvent.Kind.PORT_DOWN, "IBV_EVENT_PORT_ERR", device, port);
    }

    private static DeviceEvent up(String device, int port) {
        return DeviceEvent.port(DeviceEvent.Kind.PORT_UP, "IBV_EVENT_PORT_ACTIVE", device, port);
    }

    /** A queue pair that records when and why it was failed, and how often. */
    private static final class Recorded implements QueuePairEvents {
        final StubQueuePair queuePair;
        final CompletableFuture<String> reason = new CompletableFuture<>();
        final AtomicInteger failures = new AtomicInteger();
        volatile long failedAtNanos;

        Recorded(int qpNumber) {
            queuePair = new StubQueuePair(qpNumber);
        }

        @Override
        public void disconnected(QueuePair queuePair, String why) {
            failures.incrementAndGet();
            failedAtNanos = System.nanoTime();
            reason.complete(why);
        }

        long millisAfter(long startNanos) {
            return TimeUnit.NANOSECONDS.toMillis(failedAtNanos - startNanos);
        }
    }

    private static Recorded register(DeviceEventRouter router, String device, int port, Duration grace, int qpn) {
        Recorded r = new Recorded(qpn);
        router.register(r.queuePair, device, port, grace, r);
        return r;
    }

    @Test
    void aPortThatStaysDownFailsItsQueuePairsOnceTheirBudgetIsOverNamingPortDeviceEventAndBudget() throws Exception {
        try (DeviceEventRouter router = new DeviceEventRouter(); LogCapture log = new LogCapture()) {
            Recorded onPort = register(router, "rxe0", 1, GRACE, 10);
            Recorded longer = register(router, "rxe0", 1, GRACE.multipliedBy(2), 11);
            Recorded otherPort = register(router, "rxe0", 2, GRACE, 12);
            Recorded otherDevice = register(router, "rxe1", 1, GRACE, 13);
            long start = System.nanoTime();
            assertEquals(0, router.dispatch(down("rxe0", 1)), "a port-down fails nothing at once");
            assertEquals(1, log.count("IBV_EVENT_PORT_ERR on RDMA device rxe0 port 1: 2 connection(s) on it wait up "
                    + "to 800 ms (the retry budget) for the port to come back"));

            String why = onPort.reason.get(GRACE.toMillis() + SLACK_MILLIS, TimeUnit.MILLISECONDS);
            assertTrue(onPort.millisAfter(start) >= GRACE.toMillis(), "failed after " + onPort.millisAfter(start)
                    + " ms, before its budget of " + GRACE.toMillis() + " ms");
            assertEquals("port 1 of RDMA device rxe0 went down (IBV_EVENT_PORT_ERR) and stayed down for longer than "
                    + "the retry budget of 400 ms", why);
            String longerWhy = longer.reason.get(2 * GRACE.toMillis() + SLACK_MILLIS, TimeUnit.MILLISECONDS);
            assertTrue(longer.millisAfter(start) >= 2 * GRACE.toMillis(), "each queue pair has its own budget: "
                    + longer.millisAfter(start) + " ms");
            assertTrue(longerWhy.endsWith("retry budget of 800 ms"), longerWhy);
            assertFalse(otherPort.reason.isDone(), "another port of the device");
            assertFalse(otherDevice.reason.isDone(), "the same port of another device");
            assertEquals(1, onPort.failures.get());
            assertEquals(1, log.count("stayed down for longer than the retry budget of 400 ms: failing 1 "
                    + "connection(s) on it"));
        }
    }

    @Test
    void aPortBackWithinTheBudgetFailsNothingAndSaysHowManyRodeItOut() throws Exception {
        try (DeviceEventRouter router = new DeviceEventRouter(); LogCapture log = new LogCapture()) {
            Recorded a = register(router, "rxe0", 1, GRACE, 20);
            Recorded b = register(router, "rxe0", 1, GRACE, 21);
            Recorded gone = register(router, "rxe0", 1, GRACE, 22);
            router.dispatch(down("rxe0", 1));
            router.unregister(gone.queuePair); // closed during the outage: it did not ride it out
            router.dispatch(up("rxe0", 1));
            Thread.sleep(GRACE.toMillis() + 400); // past the budget: a check not cancelled would have run
            assertFalse(a.reason.isDone() || b.reason.isDone() || gone.reason.isDone(),
                    "the port came back within the budget");
            assertEquals(1, log.count("is active again after"));
            assertEquals(1, log.count("; 2 connection(s) rode it out"));
            assertEquals(1, log.count("port 1 of RDMA device rxe0 is active again after "));
        }
    }

    @Test
    void aPortThatGoesDownAgainGivesAFreshFullBudget() throws Exception {
        Duration grace = Duration.ofMillis(1000);
        try (DeviceEventRouter router = new DeviceEventRouter()) {
            Recorded r = register(router, "rxe0", 1, grace, 30);
            router.dispatch(down("rxe0", 1));
            Thread.sleep(600); // most of the first budget gone
            router.dispatch(up("rxe0", 1));
            long secondDown = System.nanoTime();
            router.dispatch(down("rxe0", 1));
            r.reason.get(grace.toMillis() + SLACK_MILLIS, TimeUnit.MILLISECONDS);
            // the first outage's deadline (400 ms after the second down) must not count
            assertTrue(r.millisAfter(secondDown) >= grace.toMillis(), "failed " + r.millisAfter(secondDown)
                    + " ms after the second port-down, before a full budget of " + grace.toMillis() + " ms");
            assertEquals(1, r.failures.get());
        }
    }

    @Test
    void aQueuePairRegisteredWhileItsPortIsDownGetsItsBudgetFromThen() throws Exception {
        try (DeviceEventRouter router = new DeviceEventRouter()) {
            router.dispatch(down("rxe0", 1));
            long registered = System.nanoTime();
            Recorded late = register(router, "rxe0", 1, GRACE, 40);
            late.reason.get(GRACE.toMillis() + SLACK_MILLIS, TimeUnit.MILLISECONDS);
            assertTrue(late.millisAfter(registered) >= GRACE.toMillis(), late.millisAfter(registered) + " ms");
        }
    }

    @Test
    void fatalDeviceAndQueuePairErrorsStillFailAtOnce() {
        try (DeviceEventRouter router = new DeviceEventRouter()) {
            Recorded a = register(router, "rxe0", 1, GRACE, 50);
            Recorded b = register(router, "rxe0", 1, GRACE, 51);
            Recorded other = register(router, "rxe1", 1, GRACE, 52);
            assertEquals(1, router.dispatch(DeviceEvent.queuePair("IBV_EVENT_QP_FATAL", "rxe0", 50)));
            assertEquals("queue pair 50 on RDMA device rxe0 went to error (IBV_EVENT_QP_FATAL)", a.reason.getNow(null),
                    "on the caller's thread, before dispatch returns");
            router.dispatch(down("rxe0", 1));
            assertEquals(2, router.dispatch(new DeviceEvent(DeviceEvent.Kind.DEVICE_FATAL, "IBV_EVENT_DEVICE_FATAL",
                    "rxe0", 0, -1)), "a fatal device error does not wait for the port-down's budget");
            assertEquals("RDMA device rxe0 failed (IBV_EVENT_DEVICE_FATAL)", b.reason.getNow(null));
            assertFalse(other.reason.isDone());
        }
    }

    @Test
    void closeStopsTheChecksAndTheirThread() throws Exception {
        DeviceEventRouter router = new DeviceEventRouter();
        Recorded r = register(router, "rxe0", 1, GRACE, 60);
        Set<Thread> before = graceThreads();
        router.dispatch(down("rxe0", 1));
        Set<Thread> started = graceThreads();
        started.removeAll(before);
        assertEquals(1, started.size(), "one " + DeviceEventRouter.THREAD_NAME + " thread, started at the port-down");
        Thread thread = started.iterator().next();
        assertTrue(thread.isDaemon(), "it must not keep a JVM alive");
        router.close();
        thread.join(5_000);
        assertFalse(thread.isAlive(), DeviceEventRouter.THREAD_NAME + " still running after close");
        Thread.sleep(GRACE.toMillis() + 200);
        assertFalse(r.reason.isDone(), "no check runs after close");
    }

    private static Set<Thread> graceThreads() {
        Set<Thread> threads = new HashSet<>(Thread.getAllStackTraces().keySet());
        threads.removeIf(t -> !t.getName().equals(DeviceEventRouter.THREAD_NAME) || !t.isAlive());
        return threads;
    }

    /** Only its identity and number matter to the router. */
    private record StubQueuePair(int qpNumber) implements QueuePair {
        @Override
        public FabricDevice device() {
            throw new UnsupportedOperationException();
        }

        @Override
        public QueuePairCaps caps() {
            throw new UnsupportedOperationException();
        }

        @Override
        public InetSocketAddress localAddress() {
            throw new UnsupportedOperationException();
        }

        @Override
        public InetSocketAddress peerAddress() {
            throw new UnsupportedOperationException();
        }

        @Override
        public byte[] peerPrivateData() {
            return new byte[0];
        }

        @Override
        public boolean isEstablished() {
            return true;
        }

        @Override
        public void establishedByPeer() {
        }

        @Override
        public void postSend(SendList list) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void postRecv(RecvList list) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void disconnect() {
        }

        @Override
        public void close() {
        }
    }
}
