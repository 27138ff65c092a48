package dev.artemisrdma.verbs;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;

/**
 * Direct-mapped librdmacm (connection set-up path). Pointers travel as {@code long} addresses; callers in this
 * package validate them before every call. Functions returning -1 set errno, read with {@link Errno#last()}.
 */
final class RdmaCm {

    static final NativeLibrary LIBRARY = NativeLibraries.rdmacm();

    static {
        Native.register(RdmaCm.class, LIBRARY);
    }

    private RdmaCm() {
    }

    static native long rdma_create_event_channel();

    static native void rdma_destroy_event_channel(long channel);

    static native int rdma_create_id(long channel, long idOut, long context, int portSpace);

    static native int rdma_destroy_id(long id);

    static native int rdma_bind_addr(long id, long sockaddr);

    static native int rdma_listen(long id, int backlog);

    static native int rdma_resolve_addr(long id, long srcSockaddr, long dstSockaddr, int timeoutMillis);

    static native int rdma_resolve_route(long id, int timeoutMillis);

    static native int rdma_create_qp(long id, long pd, long qpInitAttr);

    static native void rdma_destroy_qp(long id);

    static native int rdma_connect(long id, long connParam);

    static native int rdma_accept(long id, long connParam);

    static native int rdma_reject(long id, long privateData, byte privateDataLength);

    static native int rdma_disconnect(long id);

    static native int rdma_notify(long id, int event);

    static native int rdma_get_cm_event(long channel, long eventOut);

    static native int rdma_ack_cm_event(long event);

    static native int rdma_getaddrinfo(String node, String service, long hints, long resultOut);

    static native void rdma_freeaddrinfo(long result);

    static native long rdma_get_devices(long countOut);

    static native void rdma_free_devices(long list);

    static native int rdma_set_option(long id, int level, int optionName, long optionValue, long optionLength);
}
