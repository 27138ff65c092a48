package dev.artemisrdma.transport;

import dev.artemisrdma.transport.fabric.DeviceTransport;

/**
 * The limits of real RDMA devices where they differ from what this transport asks by default, for the in-memory
 * fabric ({@link FakeFabric#FakeFabric(FakeFabric.Limits)}): a change that only works on rxe fails a test under one
 * of these. Sources: rdma-core's providers (mlx5, irdma, cxgb4, siw, efa), the kernel drivers, and
 * {@code ibv_devinfo -v} on siw in the lab; inline figures are what ibv_create_qp accepts with two send
 * scatter-gather entries (providers refuse more with EINVAL and do not report it).
 */
public enum DeviceProfile {
    /** ConnectX (mlx5), InfiniBand or RoCE: everything, hundreds of inline bytes. */
    MLX5(32768, 30, 4194303, 512, 65535, 32767, DeviceTransport.INFINIBAND),
    /** Soft-RoCE, the lab's device. */
    RXE(16384, 32, 1 << 20, 256, 1024, 16384, DeviceTransport.INFINIBAND),
    /** Intel E810 (irdma) in RoCE mode: no shared receive queue, 101 inline bytes. */
    E810_ROCE(4096, 13, 1 << 20, 101, 0, 0, DeviceTransport.INFINIBAND),
    /** Intel E810 (irdma) in iWARP mode: no immediate data either. */
    E810_IWARP(4096, 13, 1 << 20, 101, 0, 0, DeviceTransport.IWARP),
    /** Intel X722 (i40iw, iWARP): 48 inline bytes, the portable floor. */
    X722_IWARP(4096, 3, 1 << 20, 48, 0, 0, DeviceTransport.IWARP),
    /** Chelsio T5/T6 (cxgb4, iWARP): shared receive queues, no immediate data. */
    CXGB4(16384, 4, 1 << 20, 280, 1024, 16384, DeviceTransport.IWARP),
    /** soft-iWARP (siw): 80 inline bytes, 6 SGEs, no immediate data, no RNR retry. */
    SIW(32768, 6, 3276800, 80, 102400, 327680, DeviceTransport.IWARP),
    /** AWS EFA: SRD only, no reliable-connected queue pairs. */
    EFA(4096, 2, 1 << 20, 32, 0, 0, DeviceTransport.NO_RELIABLE_CONNECTION);

    private final FakeFabric.Limits limits;

    DeviceProfile(int maxQpWr, int maxSge, int maxCqe, int maxInline, int maxSrq, int maxSrqWr,
                  DeviceTransport transport) {
        this.limits = new FakeFabric.Limits(maxQpWr, maxSge, maxCqe, maxInline, true, maxSrq, maxSrqWr, transport,
                true);
    }

    public FakeFabric.Limits limits() {
        return limits;
    }

    /** A fabric whose device has these limits. */
    public FakeFabric fabric() {
        return new FakeFabric(limits);
    }
}
