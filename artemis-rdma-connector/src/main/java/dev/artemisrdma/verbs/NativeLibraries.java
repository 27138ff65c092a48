package dev.artemisrdma.verbs;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;

import java.io.File;
import java.io.IOException;

/**
 * Loads the native libraries once and keeps them loaded for the life of the JVM (a JNA library object that
 * becomes unreachable is dlclose()d, and every cached function pointer would then jump into unmapped memory).
 */
final class NativeLibraries {

    static final String RDMACM = "librdmacm.so.1";
    static final String IBVERBS = "libibverbs.so.1";
    private static final String SHIM_RESOURCE = "/dev/artemisrdma/verbs/linux-x86-64/libartemisrdma.so";

    private static final String PACKAGES_HINT = "install the RDMA user-space libraries: Debian/Ubuntu "
            + "'apt-get install librdmacm1 libibverbs1 ibverbs-providers', RHEL/Fedora 'dnf install rdma-core "
            + "librdmacm libibverbs'";

    private NativeLibraries() {
    }

    static NativeLibrary rdmacm() {
        return load(RDMACM);
    }

    static NativeLibrary ibverbs() {
        return load(IBVERBS);
    }

    static NativeLibrary libc() {
        return NativeLibrary.getInstance("c");
    }

    /** The data-path shim packaged in our jar, unpacked to jna.tmpdir like JNA's own dispatch library. */
    static NativeLibrary shim() {
        checkPlatform();
        try {
            File file = Native.extractFromResourcePath(SHIM_RESOURCE, NativeLibraries.class.getClassLoader());
            return NativeLibrary.getInstance(file.getAbsolutePath());
        } catch (IOException | UnsatisfiedLinkError e) {
            throw new RdmaLibraryMissingException("cannot load the artemis-rdma native shim " + SHIM_RESOURCE
                    + " from the connector jar (" + e.getMessage() + "); the jar may be damaged, or jna.tmpdir ("
                    + System.getProperty("jna.tmpdir", System.getProperty("java.io.tmpdir"))
                    + ") is not writable", e);
        }
    }

    private static NativeLibrary load(String name) {
        checkPlatform();
        try {
            return NativeLibrary.getInstance(name);
        } catch (UnsatisfiedLinkError e) {
            throw new RdmaLibraryMissingException(name + " is not installed or cannot be loaded (" + e.getMessage()
                    + "); " + PACKAGES_HINT, e);
        }
    }

    private static void checkPlatform() {
        String os = System.getProperty("os.name", "");
        String arch = System.getProperty("os.arch", "");
        if (!os.startsWith("Linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
            throw new RdmaSetupException("artemis-rdma runs on Linux x86_64 only (this is " + os + "/" + arch
                    + "): its struct offsets have been verified for that ABI only");
        }
    }
}
