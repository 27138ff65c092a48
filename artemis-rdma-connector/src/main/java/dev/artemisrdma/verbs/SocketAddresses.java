package dev.artemisrdma.verbs;

import com.sun.jna.Pointer;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;

/** struct sockaddr_in / sockaddr_in6 decoding, and name resolution through rdma_getaddrinfo. */
final class SocketAddresses {

    private static final int AF_INET = 2;
    private static final int AF_INET6 = 10;
    private static final int RAI_PASSIVE = 1;
    private static final int RDMA_PS_TCP = 0x106;
    private static final int IBV_QPT_RC = 2;

    private SocketAddresses() {
    }

    /** Decodes a sockaddr at {@code address}; null when the family is unknown (e.g. not yet bound). */
    static InetSocketAddress decode(long address) {
        if (address == 0) {
            return null;
        }
        Pointer p = new Pointer(address);
        int family = p.getShort(0) & 0xffff;
        int port = ((p.getByte(2) & 0xff) << 8) | (p.getByte(3) & 0xff);
        try {
            if (family == AF_INET) {
                return new InetSocketAddress(InetAddress.getByAddress(p.getByteArray(4, 4)), port);
            }
            if (family == AF_INET6) {
                return new InetSocketAddress(InetAddress.getByAddress(p.getByteArray(8, 16)), port);
            }
        } catch (UnknownHostException e) {
            return null;
        }
        return null;
    }

    /** The result of rdma_getaddrinfo, freed on close. */
    static final class AddrInfo implements AutoCloseable {
        private final long info;

        private AddrInfo(long info) {
            this.info = info;
        }

        long sourceAddress() {
            return NativeStruct.readPointer(info, Abi.ADDRINFO_SRC_ADDR);
        }

        long destinationAddress() {
            return NativeStruct.readPointer(info, Abi.ADDRINFO_DST_ADDR);
        }

        @Override
        public void close() {
            RdmaCm.rdma_freeaddrinfo(info);
        }
    }

    /**
     * Resolves {@code host:port} for rdma_cm (RDMA_PS_TCP, RC). {@code passive} resolves a local address to bind
     * (host may be null or a wildcard), otherwise a destination.
     */
    static AddrInfo resolve(String host, int port, boolean passive) throws VerbsException {
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port must be 0..65535, got " + port);
        }
        try (NativeStruct hints = new NativeStruct(Abi.ADDRINFO_SIZE); NativeStruct out = new NativeStruct(8)) {
            hints.putInt(Abi.ADDRINFO_FLAGS, passive ? RAI_PASSIVE : 0);
            hints.putInt(Abi.ADDRINFO_QP_TYPE, IBV_QPT_RC);
            hints.putInt(Abi.ADDRINFO_PORT_SPACE, RDMA_PS_TCP);
            int rc = RdmaCm.rdma_getaddrinfo(host, Integer.toString(port), hints.address(), out.address());
            if (rc != 0) {
                int errno = Errno.last();
                throw new VerbsException("rdma_getaddrinfo", errno == 0 ? Errno.EINVAL : errno,
                        "for " + (host == null ? "*" : host) + ":" + port + " (rc " + rc + ")");
            }
            long info = out.getLong(0);
            if (info == 0) {
                throw new VerbsException("rdma_getaddrinfo returned no address for " + host + ":" + port);
            }
            return new AddrInfo(info);
        }
    }

    static String hostString(InetSocketAddress address) {
        return address.getAddress() != null ? address.getAddress().getHostAddress() : address.getHostString();
    }
}
