/*
 * Fakes one verbs device with its protection domain (ibv_context + ibv_pd): the parent of memory regions, completion
 * queues and shared receive queues, and (through them) of queue pairs. Enforces the device limits on creation (sizes
 * refused with EINVAL as ibv_reg_mr/ibv_create_cq/ibv_create_srq would), and that it is freed only after every object
 * on it ({@link #liveChildren}): ibv_dealloc_pd refuses (EBUSY) a protection domain with live memory regions,
 * completion queues, shared receive queues or queue pairs, so the fabric records a violation and keeps the device
 * ({@link FakeFabric#freeDevice}). State: {@code generation} is immutable (a re-added device is a new object); the sets
 * of live children are concurrent sets, written under the fabric's lock ({@link FakeFabric#lock}) as each child is
 * created or destroyed.
 */
package dev.artemisrdma.transport;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import dev.artemisrdma.transport.fabric.CompletionQueue;
import dev.artemisrdma.transport.fabric.DeviceLimits;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.RegisteredMemory;
import dev.artemisrdma.transport.fabric.SharedReceiveQueue;

final class FakeDevice implements FabricDevice {
    private final FakeFabric fabric;
    final int generation;
    /** Live objects on this device's protection domain: what must be destroyed before the device is freed. */
    final Set<FakeMr> mrs = ConcurrentHashMap.newKeySet();
    final Set<FakeCq> cqs = ConcurrentHashMap.newKeySet();
    final Set<FakeSrq> srqs = ConcurrentHashMap.newKeySet();
    final Set<FakeQp> qps = ConcurrentHashMap.newKeySet();

    FakeDevice(FakeFabric fabric, int generation) {
        this.fabric = fabric;
        this.generation = generation;
    }

    @Override
    public String name() {
        return "fake0";
    }

    @Override
    public DeviceLimits limits() {
        FakeFabric.Limits limits = fabric.limits;
        return new DeviceLimits(limits.maxQpWr(), limits.maxSge(), limits.maxCqe(), Integer.MAX_VALUE, 1024,
                limits.maxSrq(), limits.maxSrqWr(), limits.reportsInline() ? limits.maxInlineData()
                : DeviceLimits.INLINE_UNKNOWN, limits.transport());
    }

    @Override
    public boolean supportsImmediateData() {
        return !fabric.noImmediateData && FabricDevice.super.supportsImmediateData();
    }

    @Override
    public RegisteredMemory register(int bytes) throws FabricException {
        if (bytes <= 0) {
            throw new FabricException("ibv_reg_mr: " + bytes + " bytes (EINVAL)");
        }
        fabric.lock.lock();
        try {
            // 4 GiB of unmapped space after each registration (Registry): an overrun resolves to nothing
            FakeMr mr = fabric.memory.register(bytes, slot -> new FakeMr(fabric, this, slot));
            mrs.add(mr);
            fabric.liveMrs.incrementAndGet();
            return mr;
        } finally {
            fabric.lock.unlock();
        }
    }

    @Override
    public CompletionQueue createCompletionQueue(int entries) throws FabricException {
        if (entries < 1 || entries > fabric.limits.maxCqe()) {
            throw new FabricException("ibv_create_cq: " + entries + " entries (EINVAL)");
        }
        fabric.liveCqs.incrementAndGet();
        FakeCq cq = new FakeCq(fabric, this, entries);
        cqs.add(cq);
        return cq;
    }

    @Override
    public SharedReceiveQueue createSharedReceiveQueue(int maxReceives) throws FabricException {
        if (fabric.limits.maxSrq() == 0) {
            fabric.violation("ibv_create_srq on a device without shared receive queues");
            throw new FabricException("ibv_create_srq: not supported by this device (EOPNOTSUPP)");
        }
        if (maxReceives < 1 || maxReceives > fabric.limits.maxSrqWr()) {
            throw new FabricException("ibv_create_srq: " + maxReceives + " receives (EINVAL)");
        }
        FakeSrq srq = new FakeSrq(fabric, this, maxReceives);
        fabric.srqs.add(srq);
        srqs.add(srq);
        fabric.liveSrqs.incrementAndGet();
        return srq;
    }

    /** What still lives on this device, as "2 memory regions, 1 queue pair"; empty when nothing does. */
    String liveChildren() {
        List<String> live = new ArrayList<>();
        count(live, qps.size(), "queue pair");
        count(live, srqs.size(), "shared receive queue");
        count(live, cqs.size(), "completion queue");
        count(live, mrs.size(), "memory region");
        return String.join(", ", live);
    }

    private static void count(List<String> live, int n, String what) {
        if (n > 0) {
            live.add(n + " " + what + (n == 1 ? "" : "s"));
        }
    }

    @Override
    public String toString() {
        return name() + " (generation " + generation + ")";
    }
}
