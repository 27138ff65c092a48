package dev.artemisrdma.transport.verbs;

import dev.artemisrdma.transport.fabric.CompletionQueue;
import dev.artemisrdma.transport.fabric.Completions;
import dev.artemisrdma.transport.fabric.DeviceLimits;
import dev.artemisrdma.transport.fabric.DeviceTransport;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.PartialPostException;
import dev.artemisrdma.transport.fabric.RecvList;
import dev.artemisrdma.transport.fabric.RegisteredMemory;
import dev.artemisrdma.transport.fabric.SharedReceiveQueue;
import dev.artemisrdma.verbs.IbvCompletionQueue;
import dev.artemisrdma.verbs.IbvMemoryRegion;
import dev.artemisrdma.verbs.IbvSharedReceiveQueue;
import dev.artemisrdma.verbs.RdmaDevice;
import dev.artemisrdma.verbs.VerbsException;

import java.nio.ByteBuffer;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A {@link FabricDevice} over one verbs device; tracks what it created so the fabric can release leftovers. Any thread
 * creates through it (transports binding connections, completion loops making their queues); its record of live
 * objects is a concurrent set, its limits are read once at open and immutable.
 */
final class VerbsDevice implements FabricDevice {

    private final RdmaDevice device;
    private final DeviceLimits limits;
    private final Set<AutoCloseable> live = ConcurrentHashMap.newKeySet();

    VerbsDevice(RdmaDevice device) {
        this.device = device;
        this.limits = new DeviceLimits(device.maxQpWr(), device.maxSge(), device.maxCqe(), device.maxMrSize(),
                device.activeMtu(), device.maxSrq(), device.maxSrqWr(), device.maxInlineData(),
                DeviceTransport.ofVerbs(device.transportType()));
    }

    RdmaDevice rdmaDevice() {
        return device;
    }

    @Override
    public String name() {
        return device.name();
    }

    @Override
    public DeviceLimits limits() {
        return limits;
    }

    @Override
    public RegisteredMemory register(int bytes) throws FabricException {
        try {
            return new Memory(device.register(bytes));
        } catch (VerbsException e) {
            throw new FabricException(e.getMessage(), e);
        }
    }

    @Override
    public CompletionQueue createCompletionQueue(int entries) throws FabricException {
        try {
            return new Cq(device.createCompletionQueue(entries));
        } catch (VerbsException e) {
            throw new FabricException(e.getMessage(), e);
        }
    }

    @Override
    public SharedReceiveQueue createSharedReceiveQueue(int maxReceives) throws FabricException {
        try {
            return new Srq(device.createSharedReceiveQueue(maxReceives));
        } catch (VerbsException e) {
            throw new FabricException(e.getMessage(), e);
        }
    }

    /**
     * What this device's children still live at fabric close, described ("3 memory regions, 1 completion queue"), or
     * null when none. Each has an owner that kept it on purpose (a send buffer still out, a loop thread that has not
     * exited, a transport not closed): destroying it here could free memory under a buffer or a thread, so it is kept,
     * and so is the device, until its owner releases it or the process ends.
     */
    String liveChildren() {
        int memory = 0;
        int queues = 0;
        int shared = 0;
        for (AutoCloseable resource : live.toArray(new AutoCloseable[0])) {
            if (resource instanceof Srq) {
                shared++;
            } else if (resource instanceof Cq) {
                queues++;
            } else {
                memory++;
            }
        }
        if (memory + queues + shared == 0) {
            return null;
        }
        return memory + " memory regions, " + queues + " completion queues, " + shared + " shared receive queues";
    }

    /**
     * The device must go (removed, and every transport let go of it): what its owners kept is released as far as it
     * safely can be. Shared receive queues first (their queue pairs are gone), then completion queues (one whose loop
     * thread still runs refuses, see {@link IbvCompletionQueue#close}), then memory, deregistered with its pages kept
     * mapped (a buffer lent out of it stays valid). Returns what could not go, described, or null.
     */
    String releaseLeftovers() {
        for (AutoCloseable resource : live.toArray(new AutoCloseable[0])) {
            if (resource instanceof Srq srq) {
                try {
                    srq.close();
                } catch (RuntimeException ignored) {
                    // logged by the binding; its memory is then left registered
                }
            }
        }
        for (AutoCloseable resource : live.toArray(new AutoCloseable[0])) {
            if (resource instanceof Cq cq) {
                cq.close(); // kept while its poller still runs
            }
        }
        for (AutoCloseable resource : live.toArray(new AutoCloseable[0])) {
            if (resource instanceof Memory m) {
                m.abandon();
            }
        }
        return liveChildren();
    }

    @Override
    public String toString() {
        return device.name();
    }

    /** Registered memory over an {@link IbvMemoryRegion}. */
    private final class Memory implements RegisteredMemory {
        private final IbvMemoryRegion region;

        Memory(IbvMemoryRegion region) {
            this.region = region;
            live.add(this);
        }

        @Override
        public ByteBuffer buffer() {
            return region.buffer().duplicate().order(region.buffer().order());
        }

        @Override
        public long address() {
            return region.address();
        }

        @Override
        public int lkey() {
            return region.lkey();
        }

        @Override
        public int length() {
            return (int) region.length();
        }

        @Override
        public void close() {
            live.remove(this);
            region.close();
        }

        /** The device must go while this region's owner still lends out a buffer: deregister, keep the pages. */
        void abandon() {
            live.remove(this);
            region.deregisterKeepingPages();
        }
    }

    /** A shared receive queue over an {@link IbvSharedReceiveQueue}; posts through one reusable native list. */
    final class Srq implements SharedReceiveQueue {
        private final IbvSharedReceiveQueue srq;
        /** The native list receives are posted through; made, grown and freed inside {@link #gate} only. */
        private dev.artemisrdma.verbs.RecvRequests requests;
        /**
         * Posts (the completion loop whose pool this is) and the destroy run inside it: the fabric's close or a
         * device's release ({@link #releaseLeftovers}) may destroy this queue while that loop, given up on by the
         * transport, still runs and posts (see {@link PostGate}).
         */
        private final PostGate gate = new PostGate(() -> "the shared receive queue on " + name());
        private final FailureNotice failure = new FailureNotice();

        Srq(IbvSharedReceiveQueue srq) {
            this.srq = srq;
            live.add(this);
        }

        IbvSharedReceiveQueue ibv() {
            return srq;
        }

        VerbsDevice device() {
            return VerbsDevice.this;
        }

        @Override
        public int capacity() {
            return srq.capacity();
        }

        @Override
        public void postRecv(RecvList list) throws FabricException {
            gate.enter("ibv_post_srq_recv");
            try {
                postRecvInGate(list);
            } finally {
                gate.exit();
            }
        }

        private void postRecvInGate(RecvList list) throws FabricException {
            int n = list.size();
            if (requests == null || requests.maxRequests() < n) {
                if (requests != null) {
                    requests.close();
                }
                requests = new dev.artemisrdma.verbs.RecvRequests(Math.max(n, srq.capacity()));
            }
            requests.clear();
            for (int i = 0; i < n; i++) {
                requests.add(list.wrId(i), list.address(i), list.length(i), list.lkey(i));
            }
            try {
                srq.postRecv(requests);
            } catch (dev.artemisrdma.verbs.PostFailedException e) {
                throw new PartialPostException(e.getMessage(), e, e.posted());
            } catch (VerbsException e) {
                throw new FabricException(e.getMessage(), e);
            }
        }

        @Override
        public void onFailure(java.util.function.Consumer<String> listener) {
            failure.listen(listener);
        }

        /**
         * The device reported this queue in error (IBV_EVENT_SRQ_ERR): tells its listener (the completion loop whose
         * pool it is), once. Returns false when it had failed already.
         */
        boolean fail(String reason) {
            return failure.fail(reason);
        }

        @Override
        public void armLimit(int limit) throws FabricException {
            gate.enter("ibv_modify_srq"); // passes the queue to the provider, as a post does
            try {
                srq.armLimit(limit);
            } catch (VerbsException e) {
                throw new FabricException(e.getMessage(), e);
            } finally {
                gate.exit();
            }
        }

        /**
         * Destroys the queue and frees its list once no post is under way; a post after fails. When ibv_destroy_srq
         * refuses (a queue pair still uses it) this throws and the queue stays usable, posts included.
         */
        @Override
        public void close() {
            gate.release(() -> {
                srq.close();
                if (!srq.isDestroyed()) {
                    throw new IllegalStateException("ibv_destroy_srq failed on " + name()
                            + ": the shared receive queue is still in use");
                }
                live.remove(this);
                if (requests != null) {
                    requests.close();
                }
            });
        }
    }

    /** This device's live shared receive queue at {@code address} (what an async event names), or null. */
    Srq sharedReceiveQueueAt(long address) {
        for (AutoCloseable resource : live.toArray(new AutoCloseable[0])) {
            if (resource instanceof Srq q && q.ibv().address() == address) {
                return q;
            }
        }
        return null;
    }

    /** This device's live completion queue at {@code address} (what an async event names), or null. */
    Cq completionQueueAt(long address) {
        for (AutoCloseable resource : live.toArray(new AutoCloseable[0])) {
            if (resource instanceof Cq q && q.ibv().address() == address) {
                return q;
            }
        }
        return null;
    }

    /**
     * A completion queue over an {@link IbvCompletionQueue}, converting native completions to {@link Completions}.
     * A queue the device reported in error ({@link #fail}) throws on every poll from then on: a completion it could
     * not hold is lost, so nothing polled from it can be trusted to be complete.
     */
    final class Cq implements CompletionQueue {
        private final IbvCompletionQueue cq;
        private dev.artemisrdma.verbs.WorkCompletions buffer;
        /** Why the device failed this queue; null while it is sound. */
        private volatile String failure;

        Cq(IbvCompletionQueue cq) {
            this.cq = cq;
            live.add(this);
        }

        IbvCompletionQueue ibv() {
            return cq;
        }

        VerbsDevice device() {
            return VerbsDevice.this;
        }

        @Override
        public int capacity() {
            return cq.capacity();
        }

        @Override
        public int poll(Completions out) throws FabricException {
            return pollSpinning(out, 1);
        }

        /**
         * The device reported this queue in error (IBV_EVENT_CQ_ERR): every poll throws {@code reason} from now on,
         * which takes its completion loop out of service and fails that loop's connections; a blocked poller wakes.
         * Returns false when it had failed already (rxe reports every completion it drops).
         */
        synchronized boolean fail(String reason) {
            if (failure != null) {
                return false;
            }
            failure = reason;
            cq.wakeUp();
            return true;
        }

        @Override
        public int pollSpinning(Completions out, int spins) throws FabricException {
            String failed = failure;
            if (failed != null) {
                throw new FabricException(failed);
            }
            if (buffer == null || buffer.capacity() < out.capacity()) {
                if (buffer != null) {
                    buffer.close();
                }
                buffer = new dev.artemisrdma.verbs.WorkCompletions(out.capacity());
            }
            out.clear();
            try {
                int n = spins <= 1 ? cq.poll(buffer) : cq.pollSpinning(buffer, spins);
                for (int i = 0; i < n; i++) {
                    long immediate = (buffer.wcFlags(i) & dev.artemisrdma.verbs.WorkCompletions.IBV_WC_WITH_IMM) != 0
                            ? buffer.immediate(i) & 0xFFFF_FFFFL : Completions.NO_IMMEDIATE;
                    out.add(buffer.wrId(i), buffer.status(i), buffer.opcode(i), buffer.byteLength(i),
                            buffer.qpNumber(i), immediate);
                }
                return n;
            } catch (VerbsException e) {
                throw new FabricException(e.getMessage(), e);
            }
        }

        @Override
        public void requestNotification() throws FabricException {
            try {
                cq.requestNotification();
            } catch (VerbsException e) {
                throw new FabricException(e.getMessage(), e);
            }
        }

        @Override
        public boolean awaitNotification(long timeoutMillis) throws FabricException {
            try {
                return cq.awaitNotification(timeoutMillis < 0 ? -1 : (int) Math.min(Integer.MAX_VALUE, timeoutMillis));
            } catch (VerbsException e) {
                throw new FabricException(e.getMessage(), e);
            }
        }

        @Override
        public void wakeUp() {
            cq.wakeUp();
        }

        /** Destroys the queue; refused, and nothing freed, while its poller thread still runs on another thread. */
        @Override
        public void close() {
            cq.close();
            if (!cq.isClosed()) {
                return; // kept, with the completions buffer its poller reads
            }
            live.remove(this);
            if (buffer != null) {
                buffer.close();
            }
        }
    }
}
