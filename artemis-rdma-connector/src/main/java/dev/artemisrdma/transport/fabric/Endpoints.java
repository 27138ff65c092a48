package dev.artemisrdma.transport.fabric;

import java.net.InetSocketAddress;

/** How logs and errors write an endpoint's address, the same in every layer. */
public final class Endpoints {

    private Endpoints() {
    }

    /**
     * {@code 10.77.0.1:5445} or {@code [fd77::1]:5445}, without the leading slash of InetSocketAddress.toString() and
     * with IPv6 addresses in brackets, as URLs write them.
     */
    public static String describe(InetSocketAddress a) {
        if (a == null) {
            return "?";
        }
        String host = a.getAddress() != null ? a.getAddress().getHostAddress() : a.getHostString();
        return (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + a.getPort();
    }
}
