package dev.artemisrdma.verbs;

import com.sun.jna.JNIEnv;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;

/**
 * The set-up side of the native shim (libartemisrdma.so), called through JNA direct mapping: the layout table it
 * was compiled with, and the registration of {@link DataPath}'s JNI methods. JNA loads it (from the jar, into
 * jna.tmpdir) rather than System.load, so a second class loader (an OSGi bundle refreshed) can load it again.
 */
final class ShimLibrary {

    static final NativeLibrary LIBRARY = NativeLibraries.shim();

    static {
        Native.register(ShimLibrary.class, LIBRARY);
    }

    private ShimLibrary() {
    }

    static native int ardma_abi_count();

    static native String ardma_abi_name(int index);

    static native long ardma_abi_value(int index);

    /** Binds the JNI natives of the class named (slash-separated), found through this class's loader; 0 on success. */
    static native int ardma_register_natives(JNIEnv env, String className);

    private static volatile boolean dataPathRegistered;

    /**
     * Registers {@link DataPath}'s natives once, or says why it cannot. Start-up calls it first, so a failure is this
     * exception; DataPath's initialiser calls it again (a no-op then) for code that reaches DataPath directly.
     */
    static synchronized void registerDataPath() {
        if (dataPathRegistered) {
            return;
        }
        String name = DataPath.class.getName().replace('.', '/');
        int rc = ardma_register_natives(JNIEnv.CURRENT, name);
        if (rc != 0) {
            throw new RdmaLibraryMissingException("the artemis-rdma native shim could not bind the JNI methods of "
                    + DataPath.class.getName() + " (" + (rc == -1 ? "class not found" : "RegisterNatives failed")
                    + "): the connector jar and its native shim come from different builds", null);
        }
        dataPathRegistered = true;
    }
}
