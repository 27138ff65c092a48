package dev.artemisrdma.transport.fabric;

import java.util.List;

/**
 * Where an endpoint's connections may run and how they are marked: the RDMA device they must use and the RoCE type
 * of service (IP TOS / traffic class) of their packets. Validated here so that every {@link Fabric} can trust it.
 *
 * @param device the RDMA device name ({@code rxe0}, {@code mlx5_0}); null lets rdma_cm pick it from the route
 * @param tos    0..255, set with rdma_set_option(RDMA_OPTION_ID_TOS); {@link #DEFAULT_TOS} leaves the kernel's
 *               default (the route's, usually 0)
 */
public record Addressing(String device, int tos) {

    /** No type of service set: rdma_set_option is not called. */
    public static final int DEFAULT_TOS = -1;
    /** Any device, the kernel's type of service. */
    public static final Addressing ANY = new Addressing(null, DEFAULT_TOS);
    /** IB_DEVICE_NAME_MAX is 64 including the terminating NUL. */
    private static final int MAX_DEVICE_NAME = 63;

    public Addressing {
        if (device != null && (device.isBlank() || device.length() > MAX_DEVICE_NAME
                || !device.chars().allMatch(c -> c > ' ' && c < 127 && c != '/'))) {
            throw new IllegalArgumentException("device: not an RDMA device name: '" + device + "' (1.."
                    + MAX_DEVICE_NAME + " printable characters, as 'rdma link' lists them, e.g. rxe0 or mlx5_0)");
        }
        if (tos != DEFAULT_TOS) {
            requireTos(tos);
        }
    }

    /** A type of service as a user gives it: 0..255 only (leaving the key out keeps the kernel's). */
    public static int requireTos(int tos) {
        if (tos < 0 || tos > 255) {
            throw new IllegalArgumentException("tos: must be 0..255 (the IP type of service byte: DSCP << 2 | ECN, "
                    + "e.g. 106 for DSCP 26 with ECN capable), got " + tos);
        }
        return tos;
    }

    public boolean hasDevice() {
        return device != null;
    }

    public boolean hasTos() {
        return tos != DEFAULT_TOS;
    }

    /**
     * Refuses a device name that is not among {@code present}, listing them.
     *
     * @throws AddressingException naming the device, the devices present and where to look
     */
    public void requireKnownDevice(List<String> present) throws AddressingException {
        if (device != null && !present.contains(device)) {
            throw new AddressingException("no RDMA device named '" + device + "'; devices present: " + present
                    + " (see 'rdma link'); fix the device parameter or leave it out to let the route choose");
        }
    }

    @Override
    public String toString() {
        return (device == null ? "any device" : "device " + device) + (hasTos() ? ", tos " + tos : "");
    }
}
