package dev.artemisrdma.verbs;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The RDMA devices librdmacm knows (rdma_get_devices), each with a protection domain of ours.
 *
 * <p>Hot removal: librdmacm closes a removed device's context (which lets the kernel finish removing it) only once
 * nothing holds it: no rdma_cm_id on it, and no list from rdma_get_devices that names it. So a removed device is
 * first {@link #release released} (our protection domain freed, after everything on it), then {@link #refresh}
 * swaps the list for a new one, which drops our hold; a device added later appears in the next refresh.
 *
 * <p>Threads: one per fabric, which owns it. Every method is synchronized on this: the fabric's async-event thread
 * rescans and releases, a connecting thread rescans when it meets an unknown device, any thread asks for the list
 * (an unmodifiable snapshot, replaced whole on every change).
 */
public final class RdmaDevices implements AutoCloseable {

    private long list;
    private List<RdmaDevice> devices;
    /** Contexts released by us that librdmacm may still list until the kernel reports the device gone. */
    private final Set<Long> releasedContexts = new HashSet<>();

    private RdmaDevices(long list, List<RdmaDevice> devices) {
        this.list = list;
        this.devices = devices;
    }

    /** @throws RdmaSetupException when the machine has no RDMA device */
    public static RdmaDevices open() throws VerbsException {
        Rdma.ensureReady();
        try (NativeStruct count = new NativeStruct(4)) {
            long list = RdmaCm.rdma_get_devices(count.address());
            int n = count.getInt(0);
            if (list == 0 || n == 0) {
                if (list != 0) {
                    RdmaCm.rdma_free_devices(list);
                }
                throw new RdmaSetupException("no RDMA device found (rdma_get_devices returned none): check "
                        + "'ibv_devices' and 'rdma link'; for Soft-RoCE: 'modprobe rdma_rxe' then "
                        + "'rdma link add rxe0 type rxe netdev <interface>'");
            }
            List<RdmaDevice> devices = new ArrayList<>(n);
            try {
                for (int i = 0; i < n; i++) {
                    devices.add(new RdmaDevice(NativeStruct.readPointer(list, 8L * i)));
                }
            } catch (VerbsException | RuntimeException e) {
                devices.forEach(RdmaDevice::close);
                RdmaCm.rdma_free_devices(list);
                throw e;
            }
            return new RdmaDevices(list, Collections.unmodifiableList(devices));
        }
    }

    public synchronized List<RdmaDevice> all() {
        return devices;
    }

    public synchronized List<String> names() {
        List<String> names = new ArrayList<>();
        devices.forEach(d -> names.add(d.name()));
        return names;
    }

    /** The device of an rdma_cm_id's verbs context. */
    synchronized RdmaDevice byContext(long context) {
        for (RdmaDevice device : devices) {
            if (device.context() == context) {
                return device;
            }
        }
        return null;
    }

    /**
     * Frees our protection domain on a removed device and stops handing it out. Everything registered or created
     * on it must be gone already.
     */
    public synchronized void release(RdmaDevice device) {
        if (!devices.contains(device)) {
            return;
        }
        device.close();
        releasedContexts.add(device.context());
        List<RdmaDevice> rest = new ArrayList<>(devices);
        rest.remove(device);
        devices = Collections.unmodifiableList(rest);
    }

    /** True while a released device may still be held by librdmacm (refresh until it is gone). */
    public synchronized boolean removalPending() {
        return !releasedContexts.isEmpty();
    }

    /** What a {@link #refresh} found: devices that appeared (opened), devices the kernel no longer lists. */
    public record Changes(List<RdmaDevice> added, List<RdmaDevice> vanished) {
        public boolean isEmpty() {
            return added.isEmpty() && vanished.isEmpty();
        }
    }

    /**
     * Takes a fresh list from librdmacm (which rescans the kernel's devices). New devices are opened and returned.
     * A device of ours the kernel no longer lists is returned as vanished and the old list is kept (it keeps
     * librdmacm from closing the context under our protection domain, memory and queues): the caller fails and
     * frees what is on it, {@link #release}s it, and the next refresh lets librdmacm close it.
     */
    public synchronized Changes refresh() throws VerbsException {
        long fresh;
        int n;
        try (NativeStruct count = new NativeStruct(4)) {
            fresh = RdmaCm.rdma_get_devices(count.address());
            n = count.getInt(0);
        }
        if (fresh == 0) {
            // no device at all right now (librdmacm answers ENODEV without rescanning what it holds): keep ours
            return new Changes(List.of(), List.of());
        }
        Set<Long> listed = new HashSet<>();
        for (int i = 0; i < n; i++) {
            listed.add(NativeStruct.readPointer(fresh, 8L * i));
        }
        List<RdmaDevice> vanished = new ArrayList<>();
        for (RdmaDevice d : devices) {
            if (!listed.contains(d.context())) {
                vanished.add(d);
            }
        }
        if (!vanished.isEmpty()) {
            RdmaCm.rdma_free_devices(fresh);
            return new Changes(List.of(), vanished);
        }
        List<RdmaDevice> kept = new ArrayList<>(devices);
        List<RdmaDevice> added = new ArrayList<>();
        try {
            for (int i = 0; i < n; i++) {
                long context = NativeStruct.readPointer(fresh, 8L * i);
                if (byContext(context) == null && !releasedContexts.contains(context)) {
                    added.add(new RdmaDevice(context));
                }
            }
        } catch (VerbsException | RuntimeException e) {
            added.forEach(RdmaDevice::close);
            RdmaCm.rdma_free_devices(fresh);
            throw e;
        }
        RdmaCm.rdma_free_devices(list); // drops our hold on released devices: librdmacm closes them when unused
        list = fresh;
        releasedContexts.retainAll(listed);
        kept.addAll(added);
        devices = Collections.unmodifiableList(kept);
        return new Changes(added, List.of());
    }

    @Override
    public synchronized void close() {
        devices.forEach(RdmaDevice::close);
        RdmaCm.rdma_free_devices(list);
    }
}
