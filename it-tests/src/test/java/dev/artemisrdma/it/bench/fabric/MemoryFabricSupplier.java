package dev.artemisrdma.it.bench.fabric;

import java.util.function.Supplier;

import dev.artemisrdma.transport.fabric.Fabric;
import dev.artemisrdma.transport.inmemory.MemoryFabric;

/**
 * Supplies the in-memory fabric's fast mode, {@link MemoryFabric} (the connector's test classes), named by
 * {@code -Ddev.artemisrdma.fabric=dev.artemisrdma.it.bench.fabric.MemoryFabricSupplier} (the host benchmarks set it).
 */
public final class MemoryFabricSupplier implements Supplier<Fabric> {

    @Override
    public Fabric get() {
        return new MemoryFabric();
    }
}
