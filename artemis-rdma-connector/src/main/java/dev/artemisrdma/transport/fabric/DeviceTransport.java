package dev.artemisrdma.transport.fabric;

/**
 * The transport an RDMA device speaks (ibv_device.transport_type). What differs for us: iWARP has no immediate data,
 * and its MPA rule has the connecting side send first; a device with neither (AWS EFA: SRD only, usNIC) has no
 * reliable-connected queue pairs at all, which this transport needs.
 */
public enum DeviceTransport {
    /** IBV_TRANSPORT_IB: InfiniBand, RoCE and Soft-RoCE (rxe). */
    INFINIBAND("InfiniBand/RoCE"),
    /** IBV_TRANSPORT_IWARP: iWARP NICs (Chelsio, Intel E810 and X722 in iWARP mode) and soft-iWARP (siw). */
    IWARP("iWARP"),
    /** IBV_TRANSPORT_UNSPECIFIED, USNIC, USNIC_UDP: no reliable-connected queue pairs (AWS EFA, Cisco usNIC). */
    NO_RELIABLE_CONNECTION("no reliable-connected queue pairs");

    private final String label;

    DeviceTransport(String label) {
        this.label = label;
    }

    /** The verbs transport type as libibverbs numbers it (enum ibv_transport_type). */
    public static DeviceTransport ofVerbs(int transportType) {
        return switch (transportType) {
            case 0 -> INFINIBAND;
            case 1 -> IWARP;
            default -> NO_RELIABLE_CONNECTION;
        };
    }

    /** Whether SENDs may carry immediate data (IBV_WR_SEND_WITH_IMM); iWARP refuses the opcode. */
    public boolean sendsImmediateData() {
        return this == INFINIBAND;
    }

    public String label() {
        return label;
    }
}
