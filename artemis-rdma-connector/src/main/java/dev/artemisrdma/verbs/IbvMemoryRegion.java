package dev.artemisrdma.verbs;

import com.sun.jna.Pointer;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A page-aligned anonymous mapping registered with ibv_reg_mr for local write only: no remote key is ever
 * handed out. Page granularity keeps registration fork-safe (rdma-core #1222). Closing deregisters, then unmaps:
 * the owner must know that no posted work request still points into it.
 */
public final class IbvMemoryRegion implements AutoCloseable {

    private static final int IBV_ACCESS_LOCAL_WRITE = 1;

    private final RdmaDevice device;
    private final long address;
    private final long length;
    private final long mr;
    private final int lkey;
    private final ByteBuffer buffer;
    private boolean closed;

    IbvMemoryRegion(RdmaDevice device, long requested) throws VerbsException {
        if (requested <= 0 || requested > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("memory region size must be 1.." + Integer.MAX_VALUE + ", got "
                    + requested);
        }
        this.device = device;
        long page = LibC.getpagesize();
        this.length = (requested + page - 1) / page * page;
        long mapped = LibC.mmap(0, length, LibC.PROT_READ | LibC.PROT_WRITE, LibC.MAP_PRIVATE | LibC.MAP_ANONYMOUS,
                -1, 0);
        if (mapped == LibC.MAP_FAILED || mapped == 0) {
            throw VerbsException.fromErrno("mmap", "of " + length + " bytes for a memory region");
        }
        long registered = IbVerbs.ibv_reg_mr(device.pd(), mapped, length, IBV_ACCESS_LOCAL_WRITE);
        if (registered == 0) {
            int errno = Errno.last();
            LibC.munmap(mapped, length);
            String context = "of " + length + " bytes on " + device.name()
                    + (errno == Errno.ENOMEM || errno == Errno.EPERM ? ": " + MemlockLimit.advice(length) : "");
            throw new VerbsException("ibv_reg_mr", errno, context);
        }
        this.address = mapped;
        this.mr = registered;
        this.lkey = NativeStruct.readInt(registered, Abi.MR_LKEY);
        this.buffer = new Pointer(mapped).getByteBuffer(0, length).order(ByteOrder.nativeOrder());
    }

    public RdmaDevice device() {
        return device;
    }

    public long address() {
        return address;
    }

    public long length() {
        return length;
    }

    public int lkey() {
        return lkey;
    }

    /** A view over the whole region (direct, native order). */
    public ByteBuffer buffer() {
        return buffer;
    }

    public boolean isClosed() {
        return closed;
    }

    /**
     * Deregisters the region but leaves its pages mapped (leaked until the process ends): for a region whose owner
     * still lends a buffer out of it when its device must go. The device lets go of the pages; the buffer stays
     * valid memory (a post with its lkey now fails with a protection error instead of crashing the JVM).
     */
    public synchronized void deregisterKeepingPages() {
        if (closed) {
            return;
        }
        closed = true;
        int rc = IbVerbs.ibv_dereg_mr(mr);
        org.slf4j.LoggerFactory.getLogger(IbvMemoryRegion.class).warn("deregistered {} bytes on {} with a buffer still "
                + "in use; its pages stay mapped until the process ends{}", length, device.name(),
                rc == 0 ? "" : " (ibv_dereg_mr failed: " + Errno.describe(rc) + ")");
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        int rc = IbVerbs.ibv_dereg_mr(mr);
        if (rc != 0) {
            // Unmapping registered memory would leave the device writing into freed pages: leak instead.
            org.slf4j.LoggerFactory.getLogger(IbvMemoryRegion.class).error(
                    "ibv_dereg_mr failed on {}: {}; leaking {} bytes rather than unmapping registered memory",
                    device.name(), Errno.describe(rc), length);
            return;
        }
        LibC.munmap(address, length);
    }
}
