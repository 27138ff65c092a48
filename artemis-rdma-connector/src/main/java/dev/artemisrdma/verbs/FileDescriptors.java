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

    /** Bit of {@link #awaitEither}'s result: the first fd is readable. */
    static final int FIRST = 1;
    /** Bit of {@link #awaitEither}'s result: the second fd is readable. */
    static final int SECOND = 2;

    /**
     * Waits until {@code first} or {@code second} is readable or the timeout passes (negative: no timeout). Returns
     * which are readable ({@link #FIRST}, {@link #SECOND}), 0 on the timeout or an interrupted wait. {@code pollFds}
     * is a 16-byte array of two struct pollfd owned by the caller.
     */
    static int awaitEither(NativeStruct pollFds, int first, int second, int timeoutMillis) throws VerbsException {
        pollFds.putInt(0, first);
        pollFds.putInt(4, LibC.POLLIN); // events = POLLIN, revents = 0 (little-endian shorts)
        pollFds.putInt(8, second);
        pollFds.putInt(12, LibC.POLLIN);
        int ready = LibC.poll(pollFds.address(), 2, timeoutMillis);
        if (ready < 0) {
            int errno = Errno.last();
            if (errno == Errno.EINTR) {
                return 0;
            }
            throw new VerbsException("poll", errno, "on fds " + first + " and " + second);
        }
        if (ready == 0) {
            return 0;
        }
        // revents is the high short of each entry's second int; any event (POLLIN, POLLERR, POLLHUP) counts as ready
        return ((pollFds.getInt(4) >>> 16) != 0 ? FIRST : 0) | ((pollFds.getInt(12) >>> 16) != 0 ? SECOND : 0);
    }
}
