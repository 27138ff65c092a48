/*
 * Fakes one verbs device with its protection domain (ibv_context + ibv_pd): the parent of memory regions, completion
 * queues and shared receive queues. Enforces the device limits on creation (sizes refused with EINVAL as
 * ibv_reg_mr/ibv_create_cq/ibv_create_srq would). State: {@code generation} is immutable (a re-added device is a new
 * object); registrations are made under the fabric's lock ({@link FakeFabric#lock}).
 */
package dev.artemisrdma.transport;

final class FakeDevice implements FabricDevice {
    private final FakeFabric fabric;
    final int generation;

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
        return new DeviceLimits(limits.maxQpWr(), limits.maxSge(), limits.maxCqe(), Integer.MAX_VALUE, 1024);
    }

    @Override
    public boolean supportsImmediateData() {
        return !fabric.noImmediateData;
    }

    @Override
    public RegisteredMemory register(int bytes) throws FabricException {
        if (bytes <= 0) {
            throw new FabricException("ibv_reg_mr: " + bytes + " bytes (EINVAL)");
        }
        fabric.lock.lock();
        try {
            FakeMr mr = new FakeMr(fabric, fabric.nextAddress, bytes, fabric.nextKey);
            fabric.nextAddress += ((bytes + 4095L) & ~4095L) + 4096; // a guard page between registrations
            fabric.nextKey += 0x107;
            fabric.mrs.put(mr.lkey, mr);
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
        return new FakeCq(fabric, entries);
    }

    @Override
    public SharedReceiveQueue createSharedReceiveQueue(int maxReceives) throws FabricException {
        if (maxReceives < 1 || maxReceives > fabric.limits.maxQpWr()) {
            throw new FabricException("ibv_create_srq: " + maxReceives + " receives (EINVAL)");
        }
        FakeSrq srq = new FakeSrq(fabric, maxReceives);
        fabric.srqs.add(srq);
        fabric.liveSrqs.incrementAndGet();
        return srq;
    }
}
