package dev.artemisrdma.it;

import java.net.InetSocketAddress;
import java.util.concurrent.atomic.AtomicInteger;

/** Where the lab's two RDMA addresses are (rdma-lab exports them), and ports that do not collide between tests. */
public final class Lab {

    private static final AtomicInteger NEXT_PORT = new AtomicInteger(20000 + (int) (ProcessHandle.current().pid() % 20000));

    private Lab() {
    }

    /** The address of rxe0 (veth v0). */
    public static String addr0() {
        return setting("RDMA_LAB_ADDR0", "rdma.lab.addr0", "10.77.0.1");
    }

    /** The address of rxe1 (veth v1). */
    public static String addr1() {
        return setting("RDMA_LAB_ADDR1", "rdma.lab.addr1", "10.77.0.2");
    }

    /** The IPv6 address of v0 (rxe0). */
    public static String addr6_0() {
        return setting("RDMA_LAB_ADDR6_0", "rdma.lab.addr6_0", "fd77::1");
    }

    /** The IPv6 address of v1 (rxe1). */
    public static String addr6_1() {
        return setting("RDMA_LAB_ADDR6_1", "rdma.lab.addr6_1", "fd77::2");
    }

    public static int freshPort() {
        return NEXT_PORT.getAndIncrement();
    }

    public static InetSocketAddress address(String host, int port) {
        return new InetSocketAddress(host, port);
    }

    private static String setting(String env, String property, String fallback) {
        String value = System.getProperty(property);
        if (value == null || value.isEmpty()) {
            value = System.getenv(env);
        }
        return value == null || value.isEmpty() ? fallback : value;
    }
}
