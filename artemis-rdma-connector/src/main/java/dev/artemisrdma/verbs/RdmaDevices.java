package dev.artemisrdma.verbs;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/** The RDMA devices librdmacm knows (rdma_get_devices), each with a protection domain of ours. */
public final class RdmaDevices implements AutoCloseable {

    private final long list;
    private final List<RdmaDevice> devices;

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

    public List<RdmaDevice> all() {
        return devices;
    }

    public List<String> names() {
        List<String> names = new ArrayList<>();
        devices.forEach(d -> names.add(d.name()));
        return names;
    }

    /** The device of an rdma_cm_id's verbs context. */
    RdmaDevice byContext(long context) {
        for (RdmaDevice device : devices) {
            if (device.context() == context) {
                return device;
            }
        }
        return null;
    }

    @Override
    public void close() {
        devices.forEach(RdmaDevice::close);
        RdmaCm.rdma_free_devices(list);
    }
}
