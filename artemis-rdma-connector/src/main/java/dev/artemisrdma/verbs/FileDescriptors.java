package dev.artemisrdma.verbs;

/** Non-blocking fds and bounded waits on them (poll(2)), for event and completion channels. */
final class FileDescriptors {

    private FileDescriptors() {
    }

    static void setNonBlocking(int fd, String what) throws VerbsException {
        int flags = LibC.fcntl(fd, LibC.F_GETFL, 0);
        if (flags < 0 || LibC.fcntl(fd, LibC.F_SETFL, flags | LibC.O_NONBLOCK) < 0) {
            throw VerbsException.fromErrno("fcntl(O_NONBLOCK)", "on the " + what + " fd " + fd);
        }
    }

    /**
     * Waits until {@code fd} is readable or the timeout passes. {@code pollFd} is an 8-byte struct pollfd owned by
     * the caller (reused to avoid allocating per wait).
     */
    static boolean awaitReadable(NativeStruct pollFd, int fd, int timeoutMillis) throws VerbsException {
        pollFd.putInt(0, fd);
        pollFd.putInt(4, LibC.POLLIN); // events (short) = POLLIN, revents (short) = 0
        int ready = LibC.poll(pollFd.address(), 1, timeoutMillis);
        if (ready < 0) {
            int errno = Errno.last();
            if (errno == Errno.EINTR) {
                return false;
            }
            throw new VerbsException("poll", errno, "on fd " + fd);
        }
        return ready > 0;
    }
}
