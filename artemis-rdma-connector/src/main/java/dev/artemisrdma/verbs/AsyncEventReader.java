package dev.artemisrdma.verbs;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * Reads the verbs asynchronous events (ibv_get_async_event) of every device context it watches: their async fds are
 * made non-blocking and waited on together with one poll(2), with an eventfd that {@link #wakeUp} signals, so one
 * thread serves every device, waits long while nothing happens, and can always be stopped at once. Each event is
 * copied and acknowledged (ibv_ack_async_event) at once: an unacknowledged queue pair event would make
 * ibv_destroy_qp wait forever.
 *
 * <p>A device whose read fails costs only itself ({@link DeviceReads}): the events read from the others are still
 * returned, the failure goes to the caller, and a device that fails {@link DeviceReads#GIVE_UP_AFTER} reads in a row
 * is no longer watched, so it cannot make the reading thread spin.
 *
 * <p>Threading: {@link #poll} is called by one thread; {@link #watch}/{@link #unwatch} by any. A context is read
 * only under this object's lock and only while watched, so a device unwatched here can be closed right after.
 */
public final class AsyncEventReader implements AutoCloseable {

    private final List<RdmaDevice> watched = new ArrayList<>();
    private final DeviceReads<RdmaDevice> reads = new DeviceReads<>();
    private final NativeStruct event = new NativeStruct(Abi.ASYNC_EVENT_SIZE);
    private NativeStruct pollFds = new NativeStruct(16);
    private final EventFd wake;
    private boolean closed;

    public AsyncEventReader() throws VerbsException {
        wake = new EventFd("the async event reader");
    }

    /** Ends the current (or next) {@link #poll} at once: any thread, also after close. */
    public void wakeUp() {
        wake.signal();
    }

    /** Starts reading {@code device}'s events (its async fd becomes non-blocking). */
    public synchronized void watch(RdmaDevice device) throws VerbsException {
        if (closed || watched.contains(device)) {
            return;
        }
        FileDescriptors.setNonBlocking(device.asyncFd(), "async event (" + device.name() + ")");
        watched.add(device);
    }

    /** Stops reading {@code device}; once this returns its context may be closed. */
    public synchronized void unwatch(RdmaDevice device) {
        watched.remove(device);
        reads.forget(device);
    }

    /**
     * A device whose events could not be read: why, how many reads of it failed in a row, and whether it is no longer
     * watched (it failed {@link DeviceReads#GIVE_UP_AFTER} in a row; {@link #watch} it again to retry).
     */
    public record ReadFailure(RdmaDevice device, Exception error, int inARow, boolean unwatched) {
    }

    /**
     * Waits up to {@code timeoutMillis} for events on any watched device and returns those that came (empty on
     * timeout or {@link #wakeUp}); a device whose read failed goes to {@code failures} (outside the lock), and the
     * others' events are returned all the same. One thread at a time. Throws only when poll(2) itself fails.
     */
    public List<IbvAsyncEvent> poll(int timeoutMillis, Consumer<ReadFailure> failures) throws VerbsException {
        List<RdmaDevice> devices;
        NativeStruct fds;
        synchronized (this) {
            if (closed) {
                return List.of();
            }
            devices = List.copyOf(watched);
            if (pollFds.view().capacity() < FileDescriptors.POLLFD_SIZE * (devices.size() + 1)) {
                pollFds.close();
                pollFds = new NativeStruct((long) FileDescriptors.POLLFD_SIZE * (devices.size() + 1));
            }
            fds = pollFds;
            for (int i = 0; i < devices.size(); i++) {
                FileDescriptors.watchReadable(fds, i, devices.get(i).asyncFd());
            }
            FileDescriptors.watchReadable(fds, devices.size(), wake.fd()); // last: the wake-up
        }
        // poll(2) outside the lock: unwatch must not wait for it. An fd closed meanwhile reads as POLLNVAL.
        int ready = LibC.poll(fds.address(), devices.size() + 1, timeoutMillis);
        if (ready < 0) {
            int errno = Errno.last();
            if (errno == Errno.EINTR) {
                return List.of();
            }
            throw new VerbsException("poll", errno, "on the async event fds");
        }
        if (ready == 0) {
            return List.of();
        }
        if (FileDescriptors.ready(fds, devices.size())) {
            wake.drain();
        }
        List<IbvAsyncEvent> events = new ArrayList<>();
        List<DeviceReads.Failure<RdmaDevice>> failed;
        synchronized (this) {
            List<RdmaDevice> readable = new ArrayList<>();
            for (int i = 0; i < devices.size(); i++) {
                RdmaDevice device = devices.get(i);
                if (FileDescriptors.ready(fds, i) && watched.contains(device)) {
                    readable.add(device);
                }
            }
            failed = reads.read(readable, this::readAll, events);
            for (DeviceReads.Failure<RdmaDevice> f : failed) {
                if (f.givenUp()) {
                    watched.remove(f.device());
                }
            }
        }
        for (DeviceReads.Failure<RdmaDevice> f : failed) {
            failures.accept(new ReadFailure(f.device(), f.error(), f.inARow(), f.givenUp()));
        }
        return events;
    }

    /** Reads every event {@code device} has now into {@code out}; returns how many. */
    private int readAll(RdmaDevice device, List<IbvAsyncEvent> out) throws VerbsException {
        int read = 0;
        while (true) {
            if (IbVerbs.ibv_get_async_event(device.context(), event.address()) != 0) {
                int errno = Errno.last();
                if (errno == Errno.EAGAIN || errno == Errno.EINTR) {
                    return read;
                }
                throw new VerbsException("ibv_get_async_event", errno, "on " + device.name());
            }
            int raw = event.getInt(Abi.ASYNC_EVENT_EVENT_TYPE);
            IbvEventType type = IbvEventType.of(raw);
            long element = event.getLong(Abi.ASYNC_EVENT_ELEMENT);
            int port = 0;
            int qpNumber = -1;
            long srq = 0;
            long cq = 0;
            switch (type.element()) {
                case PORT -> port = event.getInt(Abi.ASYNC_EVENT_ELEMENT);
                // the queue pair cannot be destroyed before this event is acknowledged, so it is still there
                case QP -> qpNumber = element == 0 ? -1 : NativeStruct.readInt(element, Abi.QP_QP_NUM);
                case SRQ -> srq = element;
                case CQ -> cq = element;
                default -> {
                }
            }
            IbVerbs.ibv_ack_async_event(event.address());
            out.add(new IbvAsyncEvent(device, type, raw, port, qpNumber, srq, cq));
            read++;
        }
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        watched.clear();
        wake.close();
        event.close();
        pollFds.close();
    }
}
