package dev.artemisrdma.transport.config;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

import dev.artemisrdma.transport.fabric.SourceAddresses;

/**
 * The source networks an acceptor admits ({@code allowedSources}): CIDR blocks and single addresses, IPv4 and IPv6,
 * as {@code 10.0.0.0/8, fd00:a::/48, 192.168.1.7}. A connection request from anywhere else is refused before anything
 * is allocated for it. Literal addresses only: a name would make the acceptor's policy depend on DNS. Immutable.
 */
public final class SourceNetworks {

    /** No restriction: every source may connect (allowedSources unset). */
    public static final SourceNetworks ANY = new SourceNetworks(List.of());

    private static final Pattern IPV4 = Pattern.compile("\\d{1,3}(\\.\\d{1,3}){3}");
    private static final Pattern IPV6 = Pattern.compile("[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*");

    private final List<Block> blocks;

    private SourceNetworks(List<Block> blocks) {
        this.blocks = List.copyOf(blocks);
    }

    /**
     * Parses a comma- or space-separated list of CIDR blocks ({@code ADDRESS/PREFIX}) and addresses.
     *
     * @throws IllegalArgumentException naming {@code key} and the entry: not a literal address, a prefix out of
     *                                  range, host bits set beyond the prefix (a typo the acceptor would otherwise
     *                                  widen or narrow in silence), or an empty list
     */
    public static SourceNetworks parse(String key, String text) {
        List<Block> blocks = new ArrayList<>();
        for (String entry : text.trim().split("[,\\s]+")) {
            if (!entry.isEmpty()) {
                blocks.add(block(key, entry));
            }
        }
        if (blocks.isEmpty()) {
            throw new IllegalArgumentException(key + ": names no network; list CIDR blocks such as 10.0.0.0/8,"
                    + "fd00::/8, or leave it unset to admit every source");
        }
        return new SourceNetworks(blocks);
    }

    private static Block block(String key, String entry) {
        int slash = entry.indexOf('/');
        String host = slash < 0 ? entry : entry.substring(0, slash);
        if (!IPV4.matcher(host).matches() && !IPV6.matcher(host).matches()) {
            throw new IllegalArgumentException(key + ": '" + entry + "' is not an IPv4 or IPv6 address or CIDR "
                    + "block (host names are not accepted)");
        }
        InetAddress address;
        try {
            address = InetAddress.getByName(host); // a literal: no name lookup
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException(key + ": '" + entry + "' is not a valid address", e);
        }
        int bits = address.getAddress().length * 8;
        int prefix = bits;
        if (slash >= 0) {
            try {
                prefix = Integer.parseInt(entry.substring(slash + 1));
            } catch (NumberFormatException e) {
                prefix = -1;
            }
            if (prefix < 0 || prefix > bits) {
                throw new IllegalArgumentException(key + ": '" + entry + "': the prefix length must be 0.." + bits);
            }
        }
        InetAddress network = SourceAddresses.network(address, prefix);
        if (!network.equals(address)) {
            throw new IllegalArgumentException(key + ": '" + entry + "' has host bits set beyond /" + prefix
                    + "; did you mean " + network.getHostAddress() + "/" + prefix + "?");
        }
        return new Block(network, prefix);
    }

    /** Whether {@code source} may connect. */
    public boolean allows(InetAddress source) {
        if (blocks.isEmpty()) {
            return true;
        }
        for (Block b : blocks) {
            // an IPv4 block never equals an IPv6 network, nor the reverse
            if (b.network.equals(SourceAddresses.network(source, b.prefix))) {
                return true;
            }
        }
        return false;
    }

    public boolean isAny() {
        return blocks.isEmpty();
    }

    /** The blocks as a configuration would state them, e.g. {@code 10.0.0.0/8,fd00::/8}; {@code any} when unset. */
    @Override
    public String toString() {
        if (blocks.isEmpty()) {
            return "any";
        }
        StringBuilder s = new StringBuilder();
        for (Block b : blocks) {
            s.append(s.length() == 0 ? "" : ",").append(b.network.getHostAddress()).append('/').append(b.prefix);
        }
        return s.toString();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof SourceNetworks other && toString().equals(other.toString());
    }

    @Override
    public int hashCode() {
        return toString().hashCode();
    }

    private record Block(InetAddress network, int prefix) {
    }
}
