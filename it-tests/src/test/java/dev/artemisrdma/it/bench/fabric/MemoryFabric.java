package dev.artemisrdma.it.bench.fabric;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
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
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import dev.artemisrdma.transport.fabric.Addressing;
import dev.artemisrdma.transport.fabric.CompletionQueue;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.ConnectOptions;
import dev.artemisrdma.transport.fabric.ConnectionRejectedException;
import dev.artemisrdma.transport.fabric.ConnectionRequest;
import dev.artemisrdma.transport.fabric.ConnectionRequestHandler;
import dev.artemisrdma.transport.fabric.ConnectionSetup;
import dev.artemisrdma.transport.fabric.DeviceLimits;
import dev.artemisrdma.transport.fabric.DeviceTransport;
import dev.artemisrdma.transport.fabric.Fabric;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.FabricListener;
import dev.artemisrdma.transport.fabric.QueuePair;
import dev.artemisrdma.transport.fabric.QueuePairCaps;
import dev.artemisrdma.transport.fabric.QueuePairEvents;
import dev.artemisrdma.transport.fabric.QueuePairSpec;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.fabric.RegisteredMemory;
import dev.artemisrdma.transport.fabric.SendList;
import dev.artemisrdma.transport.fabric.SharedReceiveQueue;
import dev.artemisrdma.transport.fabric.WcStatus;

/**
 * A lean in-memory {@link Fabric} for measuring the transport's own cost on the host (artemis-host-bench): the verbs
 * data path reduced to what a NIC does for a SEND, with none of the checking the unit tests' {@code FakeFabric} does.
 *
 * <p><b>Why not FakeFabric.</b> FakeFabric enforces the verbs rules and so does work per operation that a NIC does
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
 *   <li>Completion queues: a ring per queue, its lock held only to append or take entries; an empty poll reads one
 *       volatile field, without the lock (a NIC's poll reads the owner bit of the next entry). Notification as the
 *       completion channel: only a completion after {@code requestNotification} wakes {@code awaitNotification},
 *       which parks the thread ({@code Condition.await}; the verbs fabric blocks in the kernel on the channel's
 *       file descriptor, a comparable cost); {@code wakeUp} ends a wait.</li>
 *   <li>Per-queue-pair order; a SEND longer than the receive fails both sides (LOC_LEN_ERR / REM_INV_REQ_ERR); an
 *       SGE outside registered memory fails with LOC_PROT_ERR; a SEND with no receive posted waits (RNR retry
 *       forever, without the delay) and is delivered in order when one is posted, counted in {@link #rnrWaits()};
 *       disconnect and destroy flush outstanding receives with WR_FLUSH_ERR and tell both sides.</li>
 *   <li>Connection set-up through a connection-manager thread, as rdma_cm: the listener's handler accepts or
 *       rejects, the passive side hears ESTABLISHED afterwards.</li>
 * </ul>
 * <p><b>What it does not model.</b> Queue depth limits (no ENOMEM when more sends or receives are outstanding than
 * the caps: the transport's credits are trusted, FakeFabric's tests check them), completion queue overrun other
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
    private final Object registry = new Object();
    /** Registrations by lkey (the index); replaced whole when it grows, so readers need no lock. */
    private volatile Mr[] mrs = new Mr[64];
    private int nextKey = 1;
    private final Object rnrLock = new Object();
    private final List<Qp> rnrQps = new ArrayList<>();
    private final AtomicInteger rnrPending = new AtomicInteger();
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
        Qp qp = createQp(setup.queuePairSpec(device), events, local, remote);
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
            while (req.outcome == 0) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    req.outcome = -2;
                    break;
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(req, left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    req.outcome = -2;
                    break;
                }
            }
            if (req.outcome == 1) {
                return qp;
            }
            if (req.outcome == -1) {
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
        if (spec.maxSendWr() > MAX_QP_WR || spec.maxRecvWr() > MAX_QP_WR || spec.maxSendSge() > MAX_SGE
                || spec.maxRecvSge() > MAX_SGE) {
            throw new FabricException("create_qp: " + spec + " exceeds the device's limits (EINVAL)");
        }
        QueuePairCaps caps = new QueuePairCaps(round(spec.maxSendWr()), srq != null ? 0 : round(spec.maxRecvWr()),
                spec.maxSendSge(), spec.maxRecvSge(), Math.min(spec.maxInlineData(), MAX_INLINE));
        return new Qp(nextQpn.getAndIncrement(), caps, cq, srq, events, local, remote);
    }

    private static int round(int n) {
        return Math.min(MAX_QP_WR, Integer.highestOneBit(Math.max(1, n - 1)) << 1);
    }

    @Override
    public void close() {
        closed = true;
        listeners.clear();
        cm.shutdown();
    }

    // ------------------------------------------------------------------------------------------ memory

    private Mr register(int length) throws FabricException {
        if (length <= 0) {
            throw new FabricException("ibv_reg_mr: " + length + " bytes (EINVAL)");
        }
        // page-aligned, as the verbs fabric's slabs are
        ByteBuffer buffer = ByteBuffer.allocateDirect(((length + 4095) & ~4095) + 4096).alignedSlice(4096);
        synchronized (registry) {
            int key = nextKey++;
            Mr[] table = mrs;
            if (key >= table.length) {
                table = java.util.Arrays.copyOf(table, table.length * 2);
            }
            Mr mr = new Mr(key, buffer.slice(0, length), length);
            table[key] = mr;
            mrs = table;
            return mr;
        }
    }

    private void deregister(Mr mr) {
        synchronized (registry) {
            Mr[] table = mrs.clone();
            table[mr.lkey] = null;
            mrs = table;
        }
    }

    /** The registration an SGE names, when {@code [address, address + length)} lies inside it; null otherwise. */
    private Mr resolve(long address, int length, int lkey) {
        Mr[] table = mrs;
        if (lkey <= 0 || lkey >= table.length) {
            return null;
        }
        Mr mr = table[lkey];
        if (mr == null || length < 0 || address < mr.address || address + length > mr.address + mr.length) {
            return null;
        }
        return mr;
    }

    // ------------------------------------------------------------------------------------------ RNR waits

    /** A SEND that found no receive: kept (inline data copied, as the caller may reuse it) until one is posted. */
    private void waitForReceive(Qp qp, SendList list, int i) {
        rnrWaits.increment();
        Pending p = new Pending(list, i);
        synchronized (rnrLock) {
            qp.pending.add(p);
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
                Pending p = qp.pending.peek();
                if (qp.state == ERROR || qp.state == DESTROYED) {
                    qp.completeSend(p.wrId, p.signaled, WcStatus.WR_FLUSH_ERR, 0, true);
                } else if (!qp.deliver(p.wrId, p.flags, p.immediate, p, null, 0, new Recv())) {
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

    /** A SEND kept while the peer had no receive posted. */
    private final class Pending {
        final long wrId;
        final int flags;
        final int immediate;
        final boolean signaled;
        final long[] address;
        final int[] length;
        final int[] lkey;
        final byte[] inline;

        Pending(SendList list, int i) {
            wrId = list.wrId(i);
            flags = list.flags(i);
            immediate = list.immediate(i);
            signaled = (flags & SendList.FLAG_SIGNALED) != 0;
            int n = list.sgeCount(i);
            int first = list.firstSge(i);
            address = new long[n];
            length = new int[n];
            lkey = new int[n];
            for (int s = 0; s < n; s++) {
                address[s] = list.sgeAddress(first + s);
                length[s] = list.sgeLength(first + s);
                lkey[s] = list.sgeLkey(first + s);
            }
            if ((flags & SendList.FLAG_INLINE) != 0) { // copied at post time: the caller may reuse the buffer
                int total = 0;
                for (int len : length) {
                    total += len;
                }
                inline = new byte[total];
                ByteBuffer into = ByteBuffer.wrap(inline);
                for (int s = 0; s < n; s++) {
                    Mr mr = resolve(address[s], length[s], lkey[s]);
                    if (mr != null) {
                        into.put(into.position(), mr.buffer, (int) (address[s] - mr.address), length[s]);
                    }
                    into.position(into.position() + length[s]);
                }
            } else {
                inline = null; // read at delivery: the transport keeps send buffers until the send completes
            }
        }
    }

    /** One receive taken from a receive queue. */
    static final class Recv {
        long wrId;
        long address;
        int length;
        int lkey;
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
        public RegisteredMemory register(int bytes) throws FabricException {
            return MemoryFabric.this.register(bytes);
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
            return new Srq(round(maxReceives));
        }

        @Override
        public String toString() {
            return name();
        }
    }

    final class Mr implements RegisteredMemory {
        final int lkey;
        final ByteBuffer buffer;
        final long address;
        final int length;

        Mr(int lkey, ByteBuffer buffer, int length) {
            this.lkey = lkey;
            this.buffer = buffer;
            this.length = length;
            this.address = (long) lkey << 32; // synthetic, page-aligned; resolve() maps it back
        }

        @Override
        public ByteBuffer buffer() {
            return buffer.duplicate().clear();
        }

        @Override
        public long address() {
            return address;
        }

        @Override
        public int lkey() {
            return lkey;
        }

        @Override
        public int length() {
            return length;
        }

        @Override
        public void close() {
            deregister(this);
        }
    }

    /** Posted receives: a ring, its lock held to add or take one. */
    static final class RecvQueue {
        private final long[] wrId;
        private final long[] address;
        private final int[] length;
        private final int[] lkey;
        private final int mask;
        private int head;
        private int size;

        RecvQueue(int capacity) {
            int c = Integer.highestOneBit(Math.max(1, capacity - 1)) << 1;
            wrId = new long[c];
            address = new long[c];
            length = new int[c];
            lkey = new int[c];
            mask = c - 1;
        }

        /** Adds every receive of the list; false when they do not fit. Caller holds the lock. */
        boolean addAll(RecvList list) {
            if (size + list.size() > wrId.length) {
                return false;
            }
            for (int i = 0; i < list.size(); i++) {
                int at = (head + size++) & mask;
                wrId[at] = list.wrId(i);
                address[at] = list.address(i);
                length[at] = list.length(i);
                lkey[at] = list.lkey(i);
            }
            return true;
        }

        synchronized boolean take(Recv out) {
            if (size == 0) {
                return false;
            }
            out.wrId = wrId[head];
            out.address = address[head];
            out.length = length[head];
            out.lkey = lkey[head];
            head = (head + 1) & mask;
            size--;
            return true;
        }

        /** Empties the queue into {@code flushed} (work request ids). Caller holds the lock. */
        void drain(List<Long> flushed) {
            while (size > 0) {
                flushed.add(wrId[head]);
                head = (head + 1) & mask;
                size--;
            }
        }
    }

    final class Srq implements SharedReceiveQueue {
        final RecvQueue rq;
        final int capacity;

        Srq(int capacity) {
            this.capacity = capacity;
            this.rq = new RecvQueue(capacity);
        }

        @Override
        public int capacity() {
            return capacity;
        }

        @Override
        public void postRecv(RecvList list) throws FabricException {
            synchronized (rq) {
                if (!rq.addAll(list)) {
                    throw new FabricException("ibv_post_srq_recv: shared receive queue full (ENOMEM)");
                }
            }
            receivesPosted();
        }

        @Override
        public void close() {
        }
    }

    /** A completion queue: a ring of entries in parallel arrays; the lock guards them and the channel's state. */
    final class Cq implements CompletionQueue {
        private final int capacity;
        private final ReentrantLock lock = new ReentrantLock();
        private final Condition event = lock.newCondition();
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
            lock.lock();
            try {
                if (closed || overrun) {
                    return;
                }
                if (count == wrId.length) {
                    if (count == capacity) {
                        overrun = true; // fatal, as IBV_EVENT_CQ_ERR: every poll throws from now on
                        available = 1;
                        event.signalAll();
                        return;
                    }
                    allocate((int) Math.min(capacity, 2L * wrId.length));
                }
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
                    event.signal();
                }
            } finally {
                lock.unlock();
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
            lock.lock();
            try {
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
            } finally {
                lock.unlock();
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
        public void requestNotification() throws FabricException {
            lock.lock();
            try {
                if (closed) {
                    throw new FabricException("ibv_req_notify_cq: completion queue destroyed");
                }
                armed = true;
            } finally {
                lock.unlock();
            }
        }

        @Override
        public boolean awaitNotification(long timeoutMillis) throws FabricException {
            lock.lock();
            try {
                long left = timeoutMillis < 0 ? Long.MAX_VALUE : TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
                while (!notified && !wakeRequested && !closed && !overrun && left > 0) {
                    if (timeoutMillis < 0) {
                        event.await();
                    } else {
                        left = event.awaitNanos(left);
                    }
                }
                wakeRequested = false; // like the eventfd: one read clears every wake-up pending
                if (notified) {
                    notified = false;
                    return true;
                }
                return false;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            } finally {
                lock.unlock();
            }
        }

        @Override
        public void wakeUp() {
            lock.lock();
            try {
                wakeRequested = true;
                event.signal();
            } finally {
                lock.unlock();
            }
        }

        @Override
        public void close() {
            lock.lock();
            try {
                closed = true;
                event.signalAll();
            } finally {
                lock.unlock();
            }
        }
    }

    final class Qp implements QueuePair {
        final int qpn;
        final QueuePairCaps caps;
        final Cq cq;
        final Srq srq;
        /** Where SENDs to this queue pair land: its own receive queue, or its shared one's. */
        final RecvQueue receives;
        final QueuePairEvents events;
        final InetSocketAddress local;
        final InetSocketAddress remote;
        /** This queue pair's SENDs waiting for a peer's receive; guarded by rnrLock. */
        final ArrayDeque<Pending> pending = new ArrayDeque<>();
        /** pending's size, read without the lock by the poster (only it adds, only while it is > 0 or posting). */
        volatile int pendingCount;
        /** The receive a direct SEND takes (posting is single-threaded per queue pair). */
        private final Recv scratch = new Recv();
        volatile int state = INIT;
        volatile Qp peer;
        volatile boolean awaitingEstablished;
        byte[] peerPrivateData = new byte[0];
        private boolean disconnected;

        Qp(int qpn, QueuePairCaps caps, Cq cq, Srq srq, QueuePairEvents events, InetSocketAddress local,
           InetSocketAddress remote) {
            this.qpn = qpn;
            this.caps = caps;
            this.cq = cq;
            this.srq = srq;
            this.receives = srq != null ? srq.rq : new RecvQueue(Math.max(1, caps.maxRecvWr()));
            this.events = events;
            this.local = local;
            this.remote = remote;
        }

        @Override
        public FabricDevice device() {
            return device;
        }

        @Override
        public QueuePairCaps caps() {
            return caps;
        }

        @Override
        public int qpNumber() {
            return qpn;
        }

        @Override
        public InetSocketAddress localAddress() {
            return local;
        }

        @Override
        public InetSocketAddress peerAddress() {
            return remote;
        }

        @Override
        public byte[] peerPrivateData() {
            return peerPrivateData.clone();
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
                int flags = list.flags(i);
                if (state != RTS) {
                    completeSend(list.wrId(i), true, WcStatus.WR_FLUSH_ERR, 0, false);
                } else if (pendingCount > 0) {
                    waitForReceive(this, list, i); // behind SENDs still waiting: keeps the order
                } else if (!deliver(list.wrId(i), flags, list.immediate(i), null, list, i, scratch)) {
                    waitForReceive(this, list, i);
                }
            }
        }

        /**
         * Executes one SEND, its scatter-gather list read from {@code kept} or else from {@code list}'s request
         * {@code i}; false when the peer has no receive posted (nothing done then).
         */
        boolean deliver(long wrId, int flags, int imm, Pending kept, SendList list, int i, Recv r) {
            boolean signaled = (flags & SendList.FLAG_SIGNALED) != 0;
            Qp p = peer;
            if (p == null || p.state != RTS) {
                completeSend(wrId, signaled, WcStatus.RETRY_EXC_ERR, 0, true);
                toError(this);
                return true;
            }
            if (!p.receives.take(r)) {
                if (p.state != RTS) {
                    completeSend(wrId, signaled, WcStatus.RETRY_EXC_ERR, 0, true);
                    toError(this);
                    return true;
                }
                return false;
            }
            Mr dst = resolve(r.address, r.length, r.lkey);
            if (dst == null) {
                p.cq.push(r.wrId, WcStatus.LOC_PROT_ERR, Completions.OPCODE_RECV, 0, p.qpn, Completions.NO_IMMEDIATE);
                completeSend(wrId, signaled, WcStatus.REM_OP_ERR, 0, true);
                toError(this);
                toError(p);
                return true;
            }
            int n = kept != null ? kept.address.length : list.sgeCount(i);
            int first = kept != null ? 0 : list.firstSge(i);
            long total = 0;
            for (int s = 0; s < n; s++) {
                total += kept != null ? kept.length[s] : list.sgeLength(first + s);
            }
            if (total > r.length) {
                p.cq.push(r.wrId, WcStatus.LOC_LEN_ERR, Completions.OPCODE_RECV, 0, p.qpn, Completions.NO_IMMEDIATE);
                completeSend(wrId, signaled, WcStatus.REM_INV_REQ_ERR, 0, true);
                toError(this);
                toError(p);
                return true;
            }
            int at = (int) (r.address - dst.address);
            if (kept != null && kept.inline != null) {
                dst.buffer.put(at, kept.inline);
                n = 0;
            }
            for (int s = 0; s < n; s++) {
                long address = kept != null ? kept.address[s] : list.sgeAddress(first + s);
                int length = kept != null ? kept.length[s] : list.sgeLength(first + s);
                int lkey = kept != null ? kept.lkey[s] : list.sgeLkey(first + s);
                Mr src = resolve(address, length, lkey);
                if (src == null) {
                    // the receive was consumed: it completes in error too, as the peer's NIC would report it
                    p.cq.push(r.wrId, WcStatus.REM_OP_ERR, Completions.OPCODE_RECV, 0, p.qpn,
                            Completions.NO_IMMEDIATE);
                    completeSend(wrId, signaled, WcStatus.LOC_PROT_ERR, 0, true);
                    toError(this);
                    return true;
                }
                dst.buffer.put(at, src.buffer, (int) (address - src.address), length);
                at += length;
            }
            sends.increment();
            bytes.add(total);
            long immediate = (flags & SendList.FLAG_IMMEDIATE) != 0 ? imm & 0xFFFF_FFFFL : Completions.NO_IMMEDIATE;
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
                if (!receives.addAll(list)) {
                    throw new FabricException("ibv_post_recv: receive queue full (ENOMEM)");
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
            synchronized (qp.receives) {
                qp.receives.drain(flushed);
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
    final class Request implements ConnectionRequest {
        final Listener listener;
        final Qp active;
        final byte[] privateData;
        /** 0 pending, 1 accepted, -1 rejected, -2 the connecting side gave up. */
        int outcome;
        byte[] rejectData = new byte[0];

        Request(Listener listener, Qp active, byte[] privateData) {
            this.listener = listener;
            this.active = active;
            this.privateData = privateData;
        }

        @Override
        public byte[] privateData() {
            return privateData.clone();
        }

        @Override
        public InetSocketAddress peerAddress() {
            return active.local;
        }

        @Override
        public InetSocketAddress localAddress() {
            return listener.address;
        }

        @Override
        public FabricDevice device() {
            return device;
        }

        @Override
        public QueuePair accept(ConnectionSetup setup, byte[] replyData, int rnrRetryCount, QueuePairEvents events)
                throws FabricException {
            synchronized (this) {
                if (outcome != 0) {
                    throw new IllegalStateException("connection request already decided");
                }
            }
            Qp pqp = createQp(setup.queuePairSpec(device), events, listener.address, active.local);
            pqp.peerPrivateData = privateData.clone();
            pqp.awaitingEstablished = true;
            setup.prepare(pqp); // handed over: the channel destroys it on every outcome
            synchronized (this) {
                if (outcome != 0) {
                    throw new FabricException("accept: the connecting side gave up");
                }
                active.peer = pqp;
                pqp.peer = active;
                active.peerPrivateData = replyData == null ? new byte[0] : replyData.clone();
                active.state = RTS;
                pqp.state = RTS;
                outcome = 1;
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
            if (outcome != 0) {
                throw new IllegalStateException("connection request already decided");
            }
            outcome = -1;
            rejectData = reason == null ? new byte[0] : reason.clone();
            notifyAll();
        }

        synchronized void rejectIfUndecided() {
            if (outcome == 0) {
                outcome = -1;
                notifyAll();
            }
        }
    }
}
