package dev.artemisrdma.transport.fabric;

import java.net.InetAddress;
import java.net.UnknownHostException;

/** Address arithmetic for per-source rules: a peer's address cut to a prefix. */
public final class SourceAddresses {

    /** The prefix that names one IPv6 host for the fabric's own fairness: its /64 (all its addresses, RoCE GIDs). */
    public static final int IPV6_HOST_PREFIX = 64;

    private SourceAddresses() {
    }

    /** {@code address} with every bit beyond the first {@code prefix} cleared. */
    private static byte[] mask(byte[] address, int prefix) {
        byte[] masked = address.clone();
        for (int i = 0; i < masked.length; i++) {
            int keep = Math.max(0, Math.min(8, prefix - i * 8));
            masked[i] &= (byte) (0xff00 >> keep);
        }
        return masked;
    }

    /** {@code peer} cut to {@code prefix} bits. */
    public static InetAddress network(InetAddress peer, int prefix) {
        try {
            return InetAddress.getByAddress(mask(peer.getAddress(), prefix));
        } catch (UnknownHostException e) {
            throw new IllegalStateException(e); // 4 or 16 bytes: never
        }
    }

    /** The host {@code peer} belongs to: an IPv4 address itself, an IPv6 address's /64. */
    public static InetAddress host(InetAddress peer) {
        return peer.getAddress().length == 4 ? peer : network(peer, IPV6_HOST_PREFIX);
    }
}
