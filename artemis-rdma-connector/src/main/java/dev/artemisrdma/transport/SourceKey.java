package dev.artemisrdma.transport;

import java.net.InetAddress;

import dev.artemisrdma.transport.fabric.SourceAddresses;

/**
 * The source a per-source limit counts a connection request against: the peer's address cut to a prefix
 * ({@code ipv4SourcePrefix}, 32 by default; {@code ipv6SourcePrefix}, 64 by default). One host holds many IPv6
 * addresses of its prefix (and on RoCE every address is a GID), so counting exact IPv6 addresses would let one host
 * be many sources and take every place meant for everyone.
 */
record SourceKey(InetAddress network, int prefix) {

    static SourceKey of(InetAddress peer, int ipv4Prefix, int ipv6Prefix) {
        int prefix = peer.getAddress().length == 4 ? ipv4Prefix : ipv6Prefix;
        return new SourceKey(SourceAddresses.network(peer, prefix), prefix);
    }

    /** {@code 10.77.0.2}, or {@code fd00:1:2:3::/64} where the key is a network. */
    @Override
    public String toString() {
        int bits = network.getAddress().length * 8;
        return prefix == bits ? network.getHostAddress() : network.getHostAddress() + "/" + prefix;
    }
}
