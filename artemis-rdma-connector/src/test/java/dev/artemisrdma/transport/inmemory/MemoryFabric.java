package dev.artemisrdma.transport.inmemory;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

import dev.artemisrdma.transport.fabric.Addressing;
import dev.artemisrdma.transport.fabric.CompletionQueue;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.ConnectOptions;
import dev.artemisrdma.transport.fabric.ConnectionRejectedException;
import dev.artemisrdma.transport.fabric.ConnectionRequestHandler;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.DeviceLimits;
import dev.artemisrdma.transport.fabric.DeviceTransport;
import dev.artemisrdma.transport.fabric.Fabric;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.FabricListener;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.fabric.QueuePairSpec;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.fabric.RegisteredMemory;
import dev.artemisrdma.transport.fabric.SendList;
import dev.artemisrdma.transport.fabric.SharedReceiveQueue;
import dev.artemisrdma.transport.fabric.WcStatus;

/**
 * The fast mode of the in-memory fabric, for measuring the transport's own cost on the host (artemis-host-bench,
 * transport-host-bench) and for the unit tests that count what the transport allocates per frame: the verbs data path
 * reduced to what a NIC does for a SEND. The verbs rules are the ones the strict mode (the unit tests'
 * {@code FakeFabric}) applies, written once in this package: {@link Registry} (registration and keys),
 * {@link VerbsRules} (caps, scatter-gather entries, inline bytes, immediate data, receive queue depth),
 * {@link Execution} (what a SEND does to the peer's receive and the completions' statuses), {@link RecvRing} (posted
 * receives). What this mode leaves out is the strict mode's bookkeeping: violation records, the send queue depth and
 * the teardown and deregistration checks. On the steady path (a SEND that finds a receive, a poll, a post of
 * receives) it allocates nothing.
 *
 * <p><b>Why not the strict mode.</b> FakeFabric enforces the verbs rules and so does work per operation that a NIC does
 * not: one fabric-wide lock taken by every post, poll, arm and wait of every connection (16 pairs serialise on it);
 * a work-request object and a byte array allocated per SEND and the data copied twice (into the array at execution,
 * out of it into the receive); a single wire thread that executes every SEND, found by a round-robin scan of all
 * queue pairs under that lock, so each message pays an extra thread hand-off (a wake-up) that a NIC does not; and
 * violation checks (concurrent posts, queue depths, deregistration scans of every posted request). Good for
 * correctness, not for a cost measurement.
 *
 * <p><b>What this fabric models.</b>
 * <ul>
 *   <li>A SEND is executed inside {@code postSend}, on the posting thread: the data is copied from the registered
 *       send buffer (each scatter-gather entry resolved by lkey and bounds-checked, as the NIC's memory translation
 *       does) straight into the peer's oldest posted receive (its own receive queue, or its shared receive queue),
 *       the receive completion (with immediate data when the SEND carried some) goes to the peer's completion queue,
 *       then the send completion (when signaled) to the sender's. So a NIC's DMA read, wire and DMA write become one
 *       {@code memcpy} on a CPU thread; that copy's CPU is charged to the posting thread (a NIC's would be free),
 *       and there is no wire latency at all (a NIC adds about 1 to 2 us per hop).</li>
 *   <li>Completion queues: a ring per queue, its monitor held only to append or take entries; an empty poll reads
 *       one volatile field, without the lock (a NIC's poll reads the owner bit of the next entry). Notification as
 *       the completion channel: only a completion after {@code requestNotification} wakes {@code awaitNotification},
 *       which parks the thread ({@code LockSupport.park}, allocation-free; the verbs fabric blocks in the kernel on
 *       the channel's file descriptor, a comparable cost); {@code wakeUp} ends a wait.</li>
 *   <li>Per-queue-pair order; a SEND longer than the receive fails both sides (LOC_LEN_ERR / REM_INV_REQ_ERR); an
 *       SGE outside registered memory fails with LOC_PROT_ERR; a SEND with no receive posted waits (RNR retry
 *       forever, without the delay) and is delivered in order when one is posted, counted in {@link #rnrWaits()};
 *       disconnect and destroy flush outstanding receives with WR_FLUSH_ERR and tell both sides.</li>
 *   <li>Connection set-up through a connection-manager thread, as rdma_cm: the listener's handler accepts or
 *       rejects, the passive side hears ESTABLISHED afterwards.</li>
 * </ul>
 * <p><b>What it does not model.</b> The send queue's depth (no ENOMEM when more sends are outstanding than the caps:
 * the transport's credits are trusted, FakeFabric's tests check them; a receive queue refuses more receives than its
 * depth, counting those not yet taken), completion queue overrun other
 * than by its capacity, the RNR retry delay and rnrRetryCount below 7, shared receive queue limit events, device
 * removal and async events, concurrent-post detection, registration rules on deregistration, and the kernel: no
 * system call anywhere on the data path (as with a real NIC's user-space verbs; rxe makes each post a system call).
 */
public final class MemoryFabric implements Fabric {

    static final int MAX_QP_WR = 16384;
    static final int MAX_SGE = 32;
    static final int MAX_CQE = 1 << 20;
    static final int MAX_INLINE = 256;
    static final int MTU = 4096;
    private static final VerbsRules.DeviceCaps CAPS = new VerbsRules.DeviceCaps(MAX_QP_WR, MAX_SGE, MAX_INLINE, true);

    static final int INIT = 0;
    static final int RTS = 1;
    static final int ERROR = 2;
    static final int DESTROYED = 3;

    private static final AtomicInteger FABRICS = new AtomicInteger();
    private static volatile MemoryFabric last;

    private final Device device = new Device();
    private final ExecutorService cm;
    private final Map<Integer, Listener> listeners = new ConcurrentHashMap<>();
    private final AtomicInteger nextPort = new AtomicInteger(40000);
    private final AtomicInteger nextQpn = new AtomicInteger(0x101);
    private final Registry<Mr> memory = new Registry<>();
    private final Object rnrLock = new Object();
    private final List<Qp> rnrQps = new ArrayList<>();
    private final AtomicInteger rnrPending = new AtomicInteger();
    /** The receive a waiting SEND takes when it is retried; guarded by rnrLock. */
    private final Recv rnrScratch = new Recv();
    private final LongAdder sends = new LongAdder();
    private final LongAdder bytes = new LongAdder();
    private final LongAdder rnrWaits = new LongAdder();
    private volatile boolean closed;

    public MemoryFabric() {
        int n = FABRICS.incrementAndGet();
        cm = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "mem-rdma-cm-" + n);
            t.setDaemon(true);
            return t;
        });
        last = this;
    }

    /** The fabric made last (the runtime's while a transport is open), or null. */
    public static MemoryFabric last() {
        return last;
    }

    /** The fabric's one device. */
    public FabricDevice device() {
        return device;
    }

    /** SENDs executed so far. */
    public long sends() {
        return sends.sum();
    }

    /** Bytes copied by SENDs so far. */
    public long bytesCopied() {
        return bytes.sum();
    }

    /** SENDs that found no receive posted and waited for one (the transport's credits should keep this 0). */
    public long rnrWaits() {
        return rnrWaits.sum();
    }

    @Override
    public String toString() {
        return "MemoryFabric (in-memory, SENDs copied on the posting thread)";
    }

    // ------------------------------------------------------------------------------------------ connections

    @Override
    public FabricListener listen(InetSocketAddress bindAddress, Addressing addressing,
                                 ConnectionRequestHandler handler) throws FabricException {
        if (closed) {
            throw new FabricException("fabric closed");
        }
        addressing.requireKnownDevice(List.of(device.name()));
        int port = bindAddress.getPort() == 0 ? nextPort.incrementAndGet() : bindAddress.getPort();
        Listener l = new Listener(new InetSocketAddress(bindAddress.getAddress(), port), handler);
        if (listeners.putIfAbsent(port, l) != null) {
            throw new FabricException("rdma_bind_addr " + l.address + ": address in use (EADDRINUSE)");
        }
        return l;
    }

    @Override
    public QueuePair connect(InetSocketAddress remote, ConnectionSetup setup, ConnectOptions options,
                             QueuePairEvents events) throws FabricException {
        if (closed) {
            throw new FabricException("fabric closed");
        }
        options.addressing().requireKnownDevice(List.of(device.name()));
        Listener l = listeners.get(remote.getPort());
        if (l == null) {
            throw new FabricException("connect to " + remote + ": connection refused (no listener)");
        }
        InetSocketAddress local = new InetSocketAddress(loopback(), nextPort.incrementAndGet());
        Qp qp = ConnectionSetup.createFitted(setup, device, spec -> createQp(spec, events, local, remote));
        setup.prepare(qp); // hands the queue pair over: only the channel destroys it from here on
        Request req = new Request(l, qp, options.privateData().clone());
        cm.execute(() -> {
            try {
                l.handler.onConnectionRequest(req);
            } catch (RuntimeException e) {
                req.rejectIfUndecided();
            }
            req.rejectIfUndecided();
        });
        long deadline = System.nanoTime() + options.timeout().toNanos();
        synchronized (req) {
            while (req.outcome == RequestBase.PENDING) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    req.outcome = RequestBase.ABANDONED;
                    break;
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(req, left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    req.outcome = RequestBase.ABANDONED;
                    break;
                }
            }
            if (req.outcome == RequestBase.ACCEPTED) {
                return qp;
            }
            if (req.outcome == RequestBase.REJECTED) {
                throw new ConnectionRejectedException(remote, req.rejectData);
            }
        }
        throw new FabricException("connect to " + remote + " timed out after " + options.timeout().toMillis()
                + " ms");
    }

    private static InetAddress loopback() {
        return InetAddress.getLoopbackAddress();
    }

    Qp createQp(QueuePairSpec spec, QueuePairEvents events, InetSocketAddress local, InetSocketAddress remote)
            throws FabricException {
        if (!(spec.completionQueue() instanceof Cq cq)) {
            throw new FabricException("create_qp: foreign completion queue (EINVAL)");
        }
        Srq srq = null;
        if (spec.sharedReceiveQueue() != null) {
            if (!(spec.sharedReceiveQueue() instanceof Srq s)) {
                throw new FabricException("create_qp: foreign shared receive queue (EINVAL)");
            }
            srq = s;
        }
        return new Qp(nextQpn.getAndIncrement(), VerbsRules.grant(spec, CAPS), cq, srq, events, local, remote);
    }

    @Override
    public void close() {
        closed = true;
        listeners.clear();
        cm.shutdown();
    }

    // ------------------------------------------------------------------------------------------ RNR waits

    /** A SEND that found no receive: kept (inline data copied, as the caller may reuse it) until one is posted. */
    private void waitForReceive(Qp qp, KeptSend send) {
        rnrWaits.increment();
        synchronized (rnrLock) {
            qp.pending.add(send);
            qp.pendingCount++;
            rnrPending.incrementAndGet();
            if (!rnrQps.contains(qp)) {
                rnrQps.add(qp);
            }
            retryLocked();
        }
    }

    /** Receives were posted: SENDs waiting for one go now (in order per queue pair). */
    void receivesPosted() {
        if (rnrPending.get() > 0) {
            synchronized (rnrLock) {
                retryLocked();
            }
        }
    }

    private void retryLocked() {
        for (int k = 0; k < rnrQps.size(); k++) {
            Qp qp = rnrQps.get(k);
            while (!qp.pending.isEmpty()) {
                KeptSend p = qp.pending.peek();
                if (qp.state == ERROR || qp.state == DESTROYED) {
                    qp.completeSend(p.wrId, p.signaled, WcStatus.WR_FLUSH_ERR, 0, true);
                } else if (!qp.deliver(p.wrId, p.signaled, p.immediate, p, rnrScratch)) {
                    break; // still no receive
                }
                qp.pending.poll();
                qp.pendingCount--;
                rnrPending.decrementAndGet();
            }
            if (qp.pending.isEmpty()) {
                rnrQps.remove(k--);
            }
        }
    }

    // ------------------------------------------------------------------------------------------ objects

    final class Device implements FabricDevice {
        @Override
        public String name() {
            return "mem0";
        }

        @Override
        public DeviceLimits limits() {
            return new DeviceLimits(MAX_QP_WR, MAX_SGE, MAX_CQE, Integer.MAX_VALUE, MTU, 1024, MAX_QP_WR, MAX_INLINE,
                    DeviceTransport.INFINIBAND);
        }

        @Override
        public RegisteredMemory register(int length) throws FabricException {
            return memory.register(length, Mr::new);
        }

        @Override
        public CompletionQueue createCompletionQueue(int entries) throws FabricException {
            if (entries < 1 || entries > MAX_CQE) {
                throw new FabricException("ibv_create_cq: " + entries + " entries (EINVAL)");
            }
            return new Cq(entries);
        }

        @Override
        public SharedReceiveQueue createSharedReceiveQueue(int maxReceives) throws FabricException {
            if (maxReceives < 1 || maxReceives > MAX_QP_WR) {
                throw new FabricException("ibv_create_srq: " + maxReceives + " receives (EINVAL)");
            }
            return new Srq(VerbsRules.depth(maxReceives, CAPS));
        }

        @Override
        public String toString() {
            return name();
        }
    }

    final class Mr extends Region {
        Mr(Registry.Slot slot) {
            super(slot);
        }

        @Override
        public void close() {
            memory.remove(this);
        }
    }

    final class Srq implements SharedReceiveQueue {
        /** Its receives; its monitor guards them. */
        final RecvRing rq;
        final int capacity;

        Srq(int capacity) {
            this.capacity = capacity;
            this.rq = new RecvRing(capacity);
        }

        @Override
        public int capacity() {
            return capacity;
        }

        @Override
        public void postRecv(RecvList list) throws FabricException {
            synchronized (rq) {
                String refused = VerbsRules.depthRefusal("ibv_post_srq_recv", -1, list.size(), rq.size(), capacity);
                if (refused != null) {
                    throw new FabricException(refused);
                }
                for (int i = 0; i < list.size(); i++) {
                    rq.add(list, i);
                }
            }
            receivesPosted();
        }

        @Override
        public void close() {
        }
    }

    /**
     * A completion queue: a ring of entries in parallel arrays; its monitor guards them and the channel's state. The
     * waiting poller parks (LockSupport), so that neither a push nor a wait allocates.
     */
    final class Cq implements CompletionQueue {
        private final int capacity;
        private long[] wrId;
        private int[] status;
        private int[] opcode;
        private int[] byteLength;
        private int[] qpNumber;
        private long[] immediate;
        private int head;
        private int count;
        /** {@code count} for pollers that look without the lock. */
        private volatile int available;
        private boolean armed;
        private boolean notified;
        private boolean wakeRequested;
        private boolean closed;
        private boolean overrun;
        /** The thread in awaitNotification, if any: what a push, a wake-up or a close unparks. */
        private volatile Thread waiter;

        Cq(int capacity) {
            this.capacity = capacity;
            allocate(Math.min(capacity, 1024));
        }

        private void allocate(int n) {
            long[] w = new long[n];
            int[] s = new int[n];
            int[] o = new int[n];
            int[] b = new int[n];
            int[] q = new int[n];
            long[] m = new long[n];
            for (int i = 0; i < count; i++) { // unwrap the old ring
                int from = (head + i) % wrId.length;
                w[i] = wrId[from];
                s[i] = status[from];
                o[i] = opcode[from];
                b[i] = byteLength[from];
                q[i] = qpNumber[from];
                m[i] = immediate[from];
            }
            wrId = w;
            status = s;
            opcode = o;
            byteLength = b;
            qpNumber = q;
            immediate = m;
            head = 0;
        }

        void push(long id, int st, int op, int length, int qpn, long imm) {
            boolean wake = false;
            synchronized (this) {
                if (closed || overrun) {
                    return;
                }
                if (count == wrId.length) {
                    if (count == capacity) {
                        overrun = true; // fatal, as IBV_EVENT_CQ_ERR: every poll throws from now on
                        available = 1;
                        wake = true;
                    } else {
                        allocate((int) Math.min(capacity, 2L * wrId.length));
                    }
                }
                if (!overrun) {
                    int at = (head + count) % wrId.length;
                    wrId[at] = id;
                    status[at] = st;
                    opcode[at] = op;
                    byteLength[at] = length;
                    qpNumber[at] = qpn;
                    immediate[at] = imm;
                    available = ++count;
                    if (armed) {
                        armed = false;
                        notified = true;
                        wake = true;
                    }
                }
            }
            if (wake) {
                unparkWaiter();
            }
        }

        private void unparkWaiter() {
            Thread w = waiter;
            if (w != null) {
                LockSupport.unpark(w);
            }
        }

        @Override
        public int capacity() {
            return capacity;
        }

        @Override
        public int poll(Completions out) throws FabricException {
            out.clear();
            if (available == 0) {
                return 0;
            }
            synchronized (this) {
                if (overrun) {
                    throw new FabricException("ibv_poll_cq: completion queue overrun (IBV_EVENT_CQ_ERR)");
                }
                int n = Math.min(count, out.capacity());
                int len = wrId.length;
                for (int i = 0; i < n; i++) {
                    out.add(wrId[head], status[head], opcode[head], byteLength[head], qpNumber[head],
                            immediate[head]);
                    head = head + 1 == len ? 0 : head + 1;
                }
                count -= n;
                available = count;
                return n;
            }
        }

        @Override
        public int pollSpinning(Completions out, int spins) throws FabricException {
            for (int i = 1; i < spins && available == 0; i++) {
                Thread.onSpinWait();
            }
            return poll(out);
        }

        @Override
        public synchronized void requestNotification() throws FabricException {
            if (closed) {
                throw new FabricException("ibv_req_notify_cq: completion queue destroyed");
            }
            armed = true;
        }

        @Override
        public boolean awaitNotification(long timeoutMillis) throws FabricException {
            long deadline = System.nanoTime() + (timeoutMillis < 0 ? 0 : TimeUnit.MILLISECONDS.toNanos(timeoutMillis));
            waiter = Thread.currentThread(); // before the check: a push after it sees this thread and unparks it
            try {
                while (true) {
                    synchronized (this) {
                        if (notified || wakeRequested || closed || overrun) {
                            wakeRequested = false; // like the eventfd: one read clears every wake-up pending
                            if (notified) {
                                notified = false;
                                return true;
                            }
                            return false;
                        }
                    }
                    if (timeoutMillis < 0) {
                        LockSupport.park(this);
                    } else {
                        long left = deadline - System.nanoTime();
                        if (left <= 0) {
                            synchronized (this) {
                                wakeRequested = false;
                            }
                            return false;
                        }
                        LockSupport.parkNanos(this, left);
                    }
                    if (Thread.currentThread().isInterrupted()) {
                        return false;
                    }
                }
            } finally {
                waiter = null;
            }
        }

        @Override
        public void wakeUp() {
            synchronized (this) {
                wakeRequested = true;
            }
            unparkWaiter();
        }

        @Override
        public void close() {
            synchronized (this) {
                closed = true;
            }
            unparkWaiter();
        }
    }

    final class Qp extends QueuePairBase<Device> {
        final Cq cq;
        final Srq srq;
        /** Where SENDs to this queue pair land: its own receive queue, or its shared one's; its monitor guards it. */
        final RecvRing receives;
        final QueuePairEvents events;
        /** This queue pair's SENDs waiting for a peer's receive; guarded by rnrLock. */
        final ArrayDeque<KeptSend> pending = new ArrayDeque<>();
        /** pending's size, read without the lock by the poster (only it adds, only while it is > 0 or posting). */
        volatile int pendingCount;
        /** The receive a direct SEND takes and the view of its request (posting is single-threaded per queue pair). */
        private final Recv scratch = new Recv();
        private final ListSges request = new ListSges();
        volatile int state = INIT;
        volatile Qp peer;
        volatile boolean awaitingEstablished;
        private boolean disconnected;

        Qp(int qpn, dev.artemisrdma.transport.fabric.QueuePairCaps caps, Cq cq, Srq srq, QueuePairEvents events,
           InetSocketAddress local, InetSocketAddress remote) {
            super(MemoryFabric.this.device, qpn, caps, local, remote);
            this.cq = cq;
            this.srq = srq;
            this.receives = srq != null ? srq.rq : new RecvRing(Math.max(1, caps.maxRecvWr()));
            this.events = events;
        }

        @Override
        public boolean isEstablished() {
            return state == RTS;
        }

        @Override
        public void establishedByPeer() {
            awaitingEstablished = false;
        }

        @Override
        public void postSend(SendList list) throws FabricException {
            int s = state;
            if (s == DESTROYED) {
                throw new FabricException("ibv_post_send: queue pair destroyed");
            }
            if (s == INIT || awaitingEstablished) {
                throw new FabricException("ibv_post_send: queue pair not established");
            }
            for (int i = 0; i < list.size(); i++) {
                String refused = VerbsRules.sendRefusal(list, i, caps, true, qpn);
                if (refused != null) {
                    throw new FabricException(refused);
                }
            }
            for (int i = 0; i < list.size(); i++) {
                int flags = list.flags(i);
                if (state != RTS) {
                    completeSend(list.wrId(i), true, WcStatus.WR_FLUSH_ERR, 0, false);
                } else if (pendingCount > 0) {
                    waitForReceive(this, new KeptSend(list, i, memory)); // behind SENDs still waiting: keeps order
                } else if (!deliver(list.wrId(i), (flags & SendList.FLAG_SIGNALED) != 0,
                        Execution.immediate(flags, list.immediate(i)), request.of(list, i), scratch)) {
                    waitForReceive(this, new KeptSend(list, i, memory));
                }
            }
        }

        /**
         * Executes one SEND by the rules of {@link Execution} into the peer's oldest receive, taken into {@code r};
         * false when the peer has no receive posted (nothing done then).
         */
        boolean deliver(long wrId, boolean signaled, long immediate, Sges send, Recv r) {
            Qp p = peer;
            if (p == null || p.state != RTS) {
                completeSend(wrId, signaled, WcStatus.RETRY_EXC_ERR, 0, true);
                toError(this);
                return true;
            }
            long total = Execution.length(send, memory);
            if (total < 0) {
                completeSend(wrId, signaled, WcStatus.LOC_PROT_ERR, 0, true);
                toError(this);
                return true;
            }
            boolean taken;
            synchronized (p.receives) {
                taken = p.receives.take(r);
            }
            if (!taken) {
                if (p.state != RTS) {
                    completeSend(wrId, signaled, WcStatus.RETRY_EXC_ERR, 0, true);
                    toError(this);
                    return true;
                }
                return false;
            }
            int outcome = Execution.deliver(send, total, memory, r);
            if (outcome != Execution.DELIVERED) {
                p.cq.push(r.wrId, Execution.receiveStatus(outcome), Completions.OPCODE_RECV, 0, p.qpn,
                        Completions.NO_IMMEDIATE);
                completeSend(wrId, signaled, Execution.sendStatus(outcome), 0, true);
                toError(this);
                toError(p);
                return true;
            }
            sends.increment();
            bytes.add(total);
            p.cq.push(r.wrId, WcStatus.SUCCESS, Completions.OPCODE_RECV, (int) total, p.qpn, immediate);
            if (signaled) {
                cq.push(wrId, WcStatus.SUCCESS, Completions.OPCODE_SEND, (int) total, qpn, Completions.NO_IMMEDIATE);
            }
            return true;
        }

        /** A send's completion; errors complete even unsignaled sends, as on verbs. */
        void completeSend(long wrId, boolean signaled, int status, int length, boolean always) {
            if (signaled || always || status != WcStatus.SUCCESS) {
                cq.push(wrId, status, Completions.OPCODE_SEND, length, qpn, Completions.NO_IMMEDIATE);
            }
        }

        @Override
        public void postRecv(RecvList list) throws FabricException {
            if (srq != null) {
                throw new FabricException("ibv_post_recv: queue pair uses a shared receive queue (EINVAL)");
            }
            if (state == DESTROYED) {
                throw new FabricException("ibv_post_recv: queue pair destroyed");
            }
            synchronized (receives) {
                if (state == ERROR) {
                    for (int i = 0; i < list.size(); i++) {
                        cq.push(list.wrId(i), WcStatus.WR_FLUSH_ERR, Completions.OPCODE_RECV, 0, qpn,
                                Completions.NO_IMMEDIATE);
                    }
                    return;
                }
                String refused = VerbsRules.depthRefusal("ibv_post_recv", qpn, list.size(), receives.size(),
                        caps.maxRecvWr());
                if (refused != null) {
                    throw new FabricException(refused);
                }
                for (int i = 0; i < list.size(); i++) {
                    receives.add(list, i);
                }
            }
            receivesPosted();
        }

        @Override
        public void disconnect() {
            Qp p;
            boolean wasConnected;
            synchronized (this) {
                if (disconnected || state == DESTROYED) {
                    return;
                }
                disconnected = true;
                wasConnected = state == RTS;
                p = peer;
            }
            toError(this);
            if (wasConnected) {
                cm.execute(() -> events.disconnected(this, "disconnected"));
            }
            if (p != null && p.state == RTS) {
                toError(p);
                cm.execute(() -> p.events.disconnected(p, "peer disconnected"));
            }
        }

        @Override
        public void close() {
            Qp p;
            synchronized (this) {
                if (state == DESTROYED) {
                    return;
                }
                p = peer;
            }
            toError(this); // outside this monitor: toError takes the RNR lock, which is taken before it elsewhere
            state = DESTROYED;
            if (p != null && p.state == RTS) {
                toError(p);
                cm.execute(() -> p.events.disconnected(p, "peer destroyed its queue pair"));
            }
        }

        @Override
        public String toString() {
            return "MemoryFabric.Qp[" + qpn + "]";
        }
    }

    /** Moves a queue pair to error: its own posted receives and its waiting SENDs complete with WR_FLUSH_ERR. */
    void toError(Qp qp) {
        synchronized (qp) {
            if (qp.state != RTS && qp.state != INIT) {
                return;
            }
            qp.state = ERROR;
        }
        if (qp.srq == null) {
            List<Long> flushed = new ArrayList<>();
            Recv r = new Recv();
            synchronized (qp.receives) {
                while (qp.receives.take(r)) {
                    flushed.add(r.wrId);
                }
            }
            for (long id : flushed) {
                qp.cq.push(id, WcStatus.WR_FLUSH_ERR, Completions.OPCODE_RECV, 0, qp.qpn, Completions.NO_IMMEDIATE);
            }
        }
        synchronized (rnrLock) {
            retryLocked(); // flushes its waiting SENDs
        }
    }

    final class Listener implements FabricListener {
        final InetSocketAddress address;
        final ConnectionRequestHandler handler;

        Listener(InetSocketAddress address, ConnectionRequestHandler handler) {
            this.address = address;
            this.handler = handler;
        }

        @Override
        public InetSocketAddress localAddress() {
            return address;
        }

        @Override
        public void close() {
            listeners.remove(address.getPort(), this);
        }
    }

    /** A connect request; its monitor guards the outcome, which the connecting thread waits for. */
    final class Request extends RequestBase<Qp> {
        final Listener listener;

        Request(Listener listener, Qp active, byte[] privateData) {
            super(active, listener.address, privateData);
            this.listener = listener;
        }

        @Override
        public FabricDevice device() {
            return device;
        }

        @Override
        public QueuePair accept(ConnectionSetup setup, byte[] replyData, int rnrRetryCount, QueuePairEvents events)
                throws FabricException {
            synchronized (this) {
                if (outcome != PENDING) {
                    throw new IllegalStateException("connection request already decided");
                }
            }
            Qp act = active;
            Qp pqp = ConnectionSetup.createFitted(setup, device,
                    spec -> createQp(spec, events, listener.address, act.local));
            pqp.peerPrivateData = privateData.clone();
            pqp.awaitingEstablished = true;
            setup.prepare(pqp); // handed over: the channel destroys it on every outcome
            synchronized (this) {
                if (outcome != PENDING) {
                    throw new FabricException("accept: the connecting side gave up");
                }
                act.peer = pqp;
                pqp.peer = act;
                act.peerPrivateData = replyData == null ? new byte[0] : replyData.clone();
                act.state = RTS;
                pqp.state = RTS;
                outcome = ACCEPTED;
                notifyAll();
            }
            cm.execute(() -> {
                pqp.awaitingEstablished = false;
                events.established(pqp);
            });
            return pqp;
        }

        @Override
        public synchronized void reject(byte[] reason) {
            if (outcome != PENDING) {
                throw new IllegalStateException("connection request already decided");
            }
            outcome = REJECTED;
            rejectData = reason == null ? new byte[0] : reason.clone();
            notifyAll();
        }

        synchronized void rejectIfUndecided() {
            if (outcome == PENDING) {
                outcome = REJECTED;
                notifyAll();
            }
        }
    }
}
