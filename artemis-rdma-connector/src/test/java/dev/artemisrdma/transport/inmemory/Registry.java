/*
 * The registrations of an in-memory fabric by lkey (the verbs rule "registration and keys"): registering gives a
 * region its lkey and a synthetic, page-aligned address with 4 GiB of unmapped space after it, so an address outside
 * every region, a wrong lkey or a range that runs past its region's end resolves to nothing (LOC_PROT_ERR), as a
 * NIC's memory translation refuses it. Lookups read the table without a lock (the executing thread resolves every
 * scatter-gather entry); registering and deregistering take this object's monitor.
 */
package dev.artemisrdma.transport.inmemory;

import java.nio.ByteBuffer;
import java.util.Arrays;

import dev.artemisrdma.transport.fabric.FabricException;

public final class Registry<R extends Region> {
    /** lkeys are spread out (not 0, 1, 2...) so that a slot index or a length passed as an lkey resolves to nothing. */
    private static final int KEY_BASE = 0x1a2b;
    private static final int KEY_STRIDE = 0x107;
    private static final long ADDRESS_BASE = 0x7f3aL;

    /** What {@link #register} hands the region's constructor. */
    public record Slot(int lkey, long address, int length, ByteBuffer bytes) {
    }

    /** Makes the fabric's region for a slot. */
    public interface Maker<R> {
        R make(Slot slot);
    }

    private volatile Region[] table = new Region[64];
    private int next;
    private int live;

    /** Registers {@code length} bytes (ibv_reg_mr); EINVAL when not positive. */
    public R register(int length, Maker<R> maker) throws FabricException {
        if (length <= 0) {
            throw new FabricException("ibv_reg_mr: " + length + " bytes (EINVAL)");
        }
        // page-aligned, as the verbs fabric's slabs are
        ByteBuffer bytes = ByteBuffer.allocateDirect(((length + 4095) & ~4095) + 4096).alignedSlice(4096)
                .slice(0, length);
        synchronized (this) {
            int index = next++;
            R region = maker.make(new Slot(KEY_BASE + index * KEY_STRIDE, (ADDRESS_BASE + index) << 32, length,
                    bytes));
            Region[] t = table;
            if (index >= t.length) {
                t = Arrays.copyOf(t, t.length * 2);
            }
            t[index] = region;
            live++;
            table = t; // publishes the new entry to the lock-free readers
            return region;
        }
    }

    /** Deregisters (ibv_dereg_mr): from now on nothing resolves into it. False when it was not registered. */
    public synchronized boolean remove(Region region) {
        int index = indexOf(region.lkey());
        Region[] t = table;
        if (index < 0 || index >= t.length || t[index] != region) {
            return false;
        }
        t[index] = null;
        live--;
        table = t;
        return true;
    }

    /** Regions registered and not deregistered. */
    public synchronized int live() {
        return live;
    }

    /** The region {@code [address, address + length)} lies in under {@code lkey}; null when none (LOC_PROT_ERR). */
    @SuppressWarnings("unchecked")
    public R resolve(long address, int length, int lkey) {
        int index = indexOf(lkey);
        Region[] t = table;
        if (index < 0 || index >= t.length) {
            return null;
        }
        Region r = t[index];
        return r != null && r.contains(address, length) ? (R) r : null;
    }

    private static int indexOf(int lkey) {
        int offset = lkey - KEY_BASE;
        return offset >= 0 && offset % KEY_STRIDE == 0 ? offset / KEY_STRIDE : -1;
    }
}
