package dev.artemisrdma.verbs;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.List;

/**
 * Compares the layout constants in {@link Abi} with the table the native shim was compiled with. A mismatch means
 * the connector was built against rdma-core headers whose structs differ from what this Java code was written
 * for; running anyway would corrupt memory, so start-up stops with a message instead.
 */
final class AbiCheck {

    private AbiCheck() {
    }

    static void verify() {
        List<String> mismatches = mismatches();
        if (!mismatches.isEmpty()) {
            throw new RdmaSetupException("rdma-core ABI mismatch between the Java binding and the native shim: "
                    + String.join(", ", mismatches) + "; rebuild artemis-rdma against rdma-core v44..v65 headers");
        }
    }

    static List<String> mismatches() {
        List<String> mismatches = new ArrayList<>();
        int count = ShimLibrary.ardma_abi_count();
        int throughJni = DataPath.abiCount(); // proves the JNI data path is bound to this very shim
        if (throughJni != count) {
            mismatches.add("the JNI data path sees " + throughJni + " layout entries, JNA " + count);
        }
        for (int i = 0; i < count; i++) {
            String name = ShimLibrary.ardma_abi_name(i);
            long nativeValue = ShimLibrary.ardma_abi_value(i);
            Long javaValue = javaValue(name);
            if (javaValue == null) {
                mismatches.add(name + " unknown to Java");
            } else if (javaValue != nativeValue) {
                mismatches.add(name + " is " + nativeValue + " natively but " + javaValue + " in Java");
            }
        }
        return mismatches;
    }

    private static Long javaValue(String name) {
        try {
            Field field = Abi.class.getField(name);
            if (!Modifier.isStatic(field.getModifiers())) {
                return null;
            }
            return field.getLong(null);
        } catch (ReflectiveOperationException e) {
            return null;
        }
    }
}
