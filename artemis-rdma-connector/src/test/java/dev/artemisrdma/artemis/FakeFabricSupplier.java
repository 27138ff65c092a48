package dev.artemisrdma.artemis;

import java.util.function.Supplier;

import dev.artemisrdma.transport.Fabric;

/**
 * Supplies the transport branch's in-memory {@code dev.artemisrdma.transport.FakeFabric} (test sources), named by
 * {@code -Ddev.artemisrdma.fabric=dev.artemisrdma.artemis.FakeFabricSupplier}. Looked up by name so this module's
 * tests compile before that class is merged.
 */
public final class FakeFabricSupplier implements Supplier<Fabric> {

    static final String FAKE_FABRIC = "dev.artemisrdma.transport.FakeFabric";

    static boolean available() {
        try {
            Class.forName(FAKE_FABRIC).getConstructor();
            return true;
        } catch (ReflectiveOperationException | LinkageError e) {
            return false;
        }
    }

    @Override
    public Fabric get() {
        try {
            return (Fabric) Class.forName(FAKE_FABRIC).getConstructor().newInstance();
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot create " + FAKE_FABRIC, e);
        }
    }
}
