package dev.artemisrdma.verbs;

/**
 * RLIMIT_MEMLOCK: registered memory is pinned and counts against it (unless the process has CAP_IPC_LOCK).
 * Checked before registering, so the user gets a fix instead of a bare ENOMEM.
 */
public final class MemlockLimit {

    private MemlockLimit() {
    }

    /** The soft limit in bytes, or -1 for unlimited. */
    public static long current() {
        try (NativeStruct rlimit = new NativeStruct(16)) {
            if (LibC.getrlimit(LibC.RLIMIT_MEMLOCK, rlimit.address()) != 0) {
                return -1;
            }
            long soft = rlimit.getLong(0);
            return soft == LibC.RLIM_INFINITY ? -1 : soft;
        }
    }

    /** The advice appended to registration failures. */
    public static String advice(long requestedBytes) {
        long limit = current();
        return "registering " + requestedBytes + " bytes of memory needs RLIMIT_MEMLOCK (ulimit -l) at least that "
                + "large; it is " + (limit < 0 ? "unlimited" : (limit / 1024) + " KiB")
                + ". Raise it: 'ulimit -l unlimited' in the shell that starts the JVM, 'memlock' in "
                + "/etc/security/limits.conf, LimitMEMLOCK=infinity for a systemd unit, --ulimit memlock=-1 for a "
                + "container, or run with CAP_IPC_LOCK";
    }
}
