package dev.artemisrdma.it.bench.fabric;

import java.util.function.Supplier;

import dev.artemisrdma.transport.fabric.Fabric;

/**
 * Supplies the lean in-memory {@link MemoryFabric}, named by
 * {@code -Ddev.artemisrdma.fabric=dev.artemisrdma.it.bench.fabric.MemoryFabricSupplier} (the host benchmark sets it).
 */
public final class MemoryFabricSupplier implements Supplier<Fabric> {

    @Override
    public Fabric get() {
        return new MemoryFabric();
    }
}
