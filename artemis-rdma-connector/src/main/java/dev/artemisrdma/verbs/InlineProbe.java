package dev.artemisrdma.verbs;

/**
 * Finds how many bytes a SEND may carry inline on a device. ibv_query_device does not report it, and a provider asked
 * for more than it has refuses ibv_create_qp with EINVAL without saying its maximum (siw allows 80, Intel E810 101,
 * X722 48, cxgb4 about 280, mlx5 several hundred). So the device is asked the only way it answers: throw-away
 * reliable-connected queue pairs (one send and one receive, two send scatter-gather entries as the transport's
 * SENDs use, on a throw-away completion queue), created and destroyed at once, never connected. At most about a
 * dozen creates, once per device, on the thread that first asks ({@link RdmaDevice#maxInlineData()}, synchronized).
 */
final class InlineProbe {

    /** The most asked for: a SEND of more than this is cheaper by DMA than copied into the work request. */
    static final int CEILING = 1024;

    private static final int IBV_QPT_RC = 2;
    private static final int SEND_SGES = 2;

    private InlineProbe() {
    }

    /** The most inline bytes accepted, or -1 when no reliable-connected queue pair can be created at all. */
    static int maxInlineData(RdmaDevice device) {
        long cq = IbVerbs.ibv_create_cq(device.context(), 4, 0, 0, 0);
        if (cq == 0) {
            return -1;
        }
        try {
            int atCeiling = tryCreate(device, cq, CEILING);
            if (atCeiling >= 0) {
                return atCeiling;
            }
            int best = tryCreate(device, cq, 0);
            if (best < 0) {
                return -1;
            }
            // accepted(good) and refused(bad) bracket the limit; providers refuse every size above theirs
            int good = 0;
            int bad = CEILING;
            while (bad - good > 1) {
                int mid = (good + bad) >>> 1;
                int got = tryCreate(device, cq, mid);
                if (got >= 0) {
                    good = mid;
                    best = Math.max(best, got);
                } else {
                    bad = mid;
                }
            }
            return Math.max(best, good);
        } finally {
            IbVerbs.ibv_destroy_cq(cq);
        }
    }

    /** What a queue pair asking {@code inline} bytes really got (the provider may round up), or -1 if refused. */
    private static int tryCreate(RdmaDevice device, long cq, int inline) {
        try (NativeStruct attr = new NativeStruct(Abi.QP_INIT_ATTR_SIZE)) {
            attr.putLong(Abi.QP_INIT_ATTR_SEND_CQ, cq);
            attr.putLong(Abi.QP_INIT_ATTR_RECV_CQ, cq);
            attr.putInt(Abi.QP_INIT_ATTR_CAP + Abi.QP_CAP_MAX_SEND_WR, 1);
            attr.putInt(Abi.QP_INIT_ATTR_CAP + Abi.QP_CAP_MAX_RECV_WR, 1);
            attr.putInt(Abi.QP_INIT_ATTR_CAP + Abi.QP_CAP_MAX_SEND_SGE, Math.min(SEND_SGES, device.maxSge()));
            attr.putInt(Abi.QP_INIT_ATTR_CAP + Abi.QP_CAP_MAX_RECV_SGE, 1);
            attr.putInt(Abi.QP_INIT_ATTR_CAP + Abi.QP_CAP_MAX_INLINE_DATA, inline);
            attr.putInt(Abi.QP_INIT_ATTR_QP_TYPE, IBV_QPT_RC);
            long qp = IbVerbs.ibv_create_qp(device.pd(), attr.address());
            if (qp == 0) {
                return -1;
            }
            int got = attr.getInt(Abi.QP_INIT_ATTR_CAP + Abi.QP_CAP_MAX_INLINE_DATA); // written back by the create
            IbVerbs.ibv_destroy_qp(qp);
            return Math.max(got, inline);
        }
    }
}
