package dev.artemisrdma.artemis;

import java.util.function.Supplier;

import dev.artemisrdma.transport.fabric.Fabric;
import dev.artemisrdma.transport.FakeFabric;

/**
 * Supplies the in-memory {@link FakeFabric}, named by
 * {@code -Ddev.artemisrdma.fabric=dev.artemisrdma.artemis.FakeFabricSupplier}. Remembers the last one made, so a test
 * can reach the fabric the runtime uses (fault injection, resource counts).
 */
public final class FakeFabricSupplier implements Supplier<Fabric> {

    private static volatile FakeFabric current;

    @Override
    public Fabric get() {
        FakeFabric fabric = new FakeFabric();
        current = fabric;
        return fabric;
    }

    /** The fabric made last: the runtime's while any transport is open. */
    static FakeFabric current() {
        FakeFabric fabric = current;
        if (fabric == null) {
            throw new IllegalStateException("no FakeFabric made yet: is TestRuntime installed and a transport open?");
        }
        return fabric;
    }
}
