package dev.artemisrdma.verbs;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Runs where no RDMA device exists: the libraries and the shim load, and the shim's layout matches Java's. */
class NativeShimTest {

    @Test
    void shimLayoutMatchesJavaConstants() {
        assertTrue(ShimLibrary.ardma_abi_count() > 100);
        assertTrue(AbiCheck.mismatches().isEmpty(), AbiCheck.mismatches().toString());
    }

    @Test
    void jniDataPathIsBoundThroughTheShim() {
        // DataPath's natives have no exported symbols: only the shim's RegisterNatives can make this call work
        assertEquals(ShimLibrary.ardma_abi_count(), DataPath.abiCount());
    }

    @Test
    void memlockAdviceSaysHowToRaiseTheLimit() {
        String advice = MemlockLimit.advice(1 << 20);
        assertTrue(advice.contains("ulimit -l"), advice);
        assertTrue(advice.contains("CAP_IPC_LOCK"), advice);
    }
}
