package dev.artemisrdma.verbs;

import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;

/**
 * The few libc calls the binding needs: poll for stoppable waits, an eventfd to end such a wait early, fcntl,
 * page-aligned memory, rlimits.
 */
final class LibC {

    static final NativeLibrary LIBRARY = NativeLibraries.libc();

    static final int POLLIN = 0x1;
    static final int F_GETFL = 3;
    static final int F_SETFL = 4;
    static final int O_NONBLOCK = 0x800;
    static final int PROT_READ = 0x1;
    static final int PROT_WRITE = 0x2;
    static final int MAP_PRIVATE = 0x02;
    static final int MAP_ANONYMOUS = 0x20;
    static final long MAP_FAILED = -1L;
    static final int RLIMIT_MEMLOCK = 8;
    static final int EFD_NONBLOCK = 0x800;
    static final int EFD_CLOEXEC = 0x80000;
    static final long RLIM_INFINITY = -1L;

    static {
        Native.register(LibC.class, LIBRARY);
    }

    private LibC() {
    }

    static native int poll(long fds, long count, int timeoutMillis);

    static native int fcntl(int fd, int command, int argument);

    static native int eventfd(int initialValue, int flags);

    static native long read(int fd, long buffer, long count);

    static native long write(int fd, long buffer, long count);

    static native int close(int fd);

    static native long mmap(long address, long length, int protection, int flags, int fd, long offset);

    static native int munmap(long address, long length);

    static native int getrlimit(int resource, long rlimit);

    static native long strerror(int errnum);

    static native int getpagesize();
}
