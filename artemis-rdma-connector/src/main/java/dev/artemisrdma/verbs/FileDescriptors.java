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

    /** Bytes of one struct pollfd: int fd, short events, short revents. */
    static final int POLLFD_SIZE = 8;

    /** Sets entry {@code index} of a pollfd array to wait for {@code fd} to be readable (revents cleared). */
    static void watchReadable(NativeStruct pollFds, int index, int fd) {
        pollFds.putInt(POLLFD_SIZE * index, fd);
        pollFds.putInt(POLLFD_SIZE * index + 4, LibC.POLLIN); // events = POLLIN, revents = 0 (little-endian shorts)
    }

    /** Whether poll(2) reported anything (POLLIN, POLLERR, POLLHUP, POLLNVAL) on entry {@code index}. */
    static boolean ready(NativeStruct pollFds, int index) {
        return (pollFds.getInt(POLLFD_SIZE * index + 4) >>> 16) != 0; // revents: the high short of the second int
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
        watchReadable(pollFds, 0, first);
        watchReadable(pollFds, 1, second);
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
        return (ready(pollFds, 0) ? FIRST : 0) | (ready(pollFds, 1) ? SECOND : 0);
    }
}
