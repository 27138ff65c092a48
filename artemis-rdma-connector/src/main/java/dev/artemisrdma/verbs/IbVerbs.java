package dev.artemisrdma.verbs;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;

/**
 * Direct-mapped exported libibverbs functions (resource set-up and the completion channel). Most return 0 or a
 * positive errno; the object constructors return NULL and set errno.
 */
final class IbVerbs {

    static final NativeLibrary LIBRARY = NativeLibraries.ibverbs();

    static {
        Native.register(IbVerbs.class, LIBRARY);
    }

    private IbVerbs() {
    }

    static native long ibv_alloc_pd(long context);

    static native int ibv_dealloc_pd(long pd);

    static native long ibv_reg_mr(long pd, long address, long length, int access);

    static native int ibv_dereg_mr(long mr);

    static native long ibv_create_comp_channel(long context);

    static native int ibv_destroy_comp_channel(long channel);

    static native long ibv_create_cq(long context, int cqe, long cqContext, long channel, int compVector);

    static native int ibv_destroy_cq(long cq);

    static native int ibv_get_cq_event(long channel, long cqOut, long cqContextOut);

    static native void ibv_ack_cq_events(long cq, int count);

    static native int ibv_query_device(long context, long deviceAttr);

    static native int ibv_query_port(long context, byte portNum, long portAttr);

    static native int ibv_query_qp(long qp, long qpAttr, int attrMask, long qpInitAttr);

    static native long ibv_get_device_name(long device);

    static native long ibv_create_srq(long pd, long srqInitAttr);

    static native int ibv_modify_srq(long srq, long srqAttr, int srqAttrMask);

    static native int ibv_destroy_srq(long srq);

    static native int ibv_get_async_event(long context, long event);

    static native void ibv_ack_async_event(long event);

    static native int ibv_modify_qp(long qp, long attr, int attrMask);

    /** Only for {@link InlineProbe}'s throw-away queue pairs: connections' queue pairs come from rdma_create_qp. */
    static native long ibv_create_qp(long pd, long qpInitAttr);

    static native int ibv_destroy_qp(long qp);
}
