package dev.artemisrdma.verbs;

/**
 * A non-blocking eventfd(2) that another thread signals to end a {@code poll} early: how a completion loop blocked
 * without a timeout is told to look at its channels (one closing, a stop request) without a completion to wake it.
 * {@link #signal} is safe from any thread and after {@link #close} (it then does nothing: a closed fd number may
 * already belong to someone else).
 */
final class EventFd implements AutoCloseable {

    private final int fd;
    /** Eight bytes: the counter value written by {@link #signal}, then the one {@link #drain} reads into. */
    private final NativeStruct one = new NativeStruct(8);
    private final NativeStruct drained = new NativeStruct(8);
    /** Two struct pollfd: the watched fd, then this one (used by the one polling thread). */
    private final NativeStruct pollFds = new NativeStruct(16);
    private boolean closed;

    EventFd(String what) throws VerbsException {
        int created = LibC.eventfd(0, LibC.EFD_NONBLOCK | LibC.EFD_CLOEXEC);
        if (created < 0) {
            int errno = Errno.last();
            one.close();
            drained.close();
            pollFds.close();
            throw new VerbsException("eventfd", errno, "for the wake-up of " + what);
        }
        fd = created;
        one.putLong(0, 1);
    }

    int fd() {
        return fd;
    }

    /** Makes the fd readable until {@link #drain}; a signal already pending is merged (the counter adds up). */
    synchronized void signal() {
        if (!closed) {
            LibC.write(fd, one.address(), 8); // only EAGAIN at a counter near 2^64 can fail: readable anyway
        }
    }

    /**
     * Waits until {@code watched} is readable, the timeout passes (negative: none) or {@link #signal} (also one that
     * came before the wait); returns whether {@code watched} is readable. A signal is consumed here. One thread.
     */
    boolean awaitReadable(int watched, int timeoutMillis) throws VerbsException {
        int ready = FileDescriptors.awaitEither(pollFds, watched, fd, timeoutMillis);
        if ((ready & FileDescriptors.SECOND) != 0) {
            drain();
        }
        return (ready & FileDescriptors.FIRST) != 0;
    }

    /** Resets the counter (poll thread): the fd is not readable again until the next signal. */
    void drain() {
        LibC.read(fd, drained.address(), 8); // EAGAIN when nothing was pending: fine
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        LibC.close(fd);
        one.close();
        drained.close();
        pollFds.close();
    }
}
