package dev.artemisrdma.verbs;

import com.sun.jna.Pointer;

/**
 * An rdma_cm event channel whose fd is non-blocking and polled with a timeout, or until {@link #wakeUp}, so the
 * thread that waits on it can always be stopped at once. Every event is copied and acknowledged at once: an
 * unacknowledged event would make rdma_destroy_id block forever.
 */
public final class RdmaEventChannel implements AutoCloseable {

    private final long channel;
    private final int fd;
    private final NativeStruct eventOut = new NativeStruct(8);
    private final EventFd wake;
    private boolean closed;

    public RdmaEventChannel() throws VerbsException {
        Rdma.ensureReady();
        long created = RdmaCm.rdma_create_event_channel();
        if (created == 0) {
            throw VerbsException.fromErrno("rdma_create_event_channel", "");
        }
        channel = created;
        fd = NativeStruct.readInt(channel, Abi.EVENT_CHANNEL_FD);
        EventFd w = null;
        try {
            FileDescriptors.setNonBlocking(fd, "rdma_cm event channel");
            w = new EventFd("the rdma_cm event channel");
        } catch (VerbsException e) {
            RdmaCm.rdma_destroy_event_channel(channel);
            eventOut.close();
            throw e;
        }
        wake = w;
    }

    /** Ends the current (or next) {@link #poll} at once: any thread, also after close. */
    public void wakeUp() {
        wake.signal();
    }

    long address() {
        return channel;
    }

    /** Waits up to {@code timeoutMillis} for an event; null on timeout or {@link #wakeUp}. One thread at a time. */
    public synchronized CmEvent poll(int timeoutMillis) throws VerbsException {
        checkOpen();
        if (!wake.awaitReadable(fd, timeoutMillis)) {
            return null;
        }
        if (RdmaCm.rdma_get_cm_event(channel, eventOut.address()) != 0) {
            int errno = Errno.last();
            if (errno == Errno.EAGAIN || errno == Errno.EINTR) {
                return null;
            }
            throw new VerbsException("rdma_get_cm_event", errno, "");
        }
        long event = eventOut.getLong(0);
        Pointer p = new Pointer(event);
        long id = p.getLong(Abi.CM_EVENT_ID);
        long listenId = p.getLong(Abi.CM_EVENT_LISTEN_ID);
        int type = p.getInt(Abi.CM_EVENT_EVENT);
        int status = p.getInt(Abi.CM_EVENT_STATUS);
        long data = p.getLong(Abi.CM_EVENT_PARAM_CONN + Abi.CONN_PARAM_PRIVATE_DATA);
        int length = p.getByte(Abi.CM_EVENT_PARAM_CONN + Abi.CONN_PARAM_PRIVATE_DATA_LEN) & 0xff;
        CmEventType eventType = CmEventType.of(type);
        // Only connection events carry conn params; for the others the union holds something else.
        boolean hasConnParams = eventType == CmEventType.CONNECT_REQUEST || eventType == CmEventType.ESTABLISHED
                || eventType == CmEventType.REJECTED || eventType == CmEventType.CONNECT_RESPONSE;
        byte[] privateData = hasConnParams && data != 0 && length > 0 ? new Pointer(data).getByteArray(0, length)
                : new byte[0];
        if (RdmaCm.rdma_ack_cm_event(event) != 0) {
            throw VerbsException.fromErrno("rdma_ack_cm_event", "for " + eventType.cName());
        }
        return new CmEvent(eventType, id, listenId, status, privateData);
    }

    private void checkOpen() throws VerbsException {
        if (closed) {
            throw new VerbsException("rdma_cm event channel is closed");
        }
    }

    /** Destroys the channel; every rdma_cm_id on it must have been destroyed first. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        RdmaCm.rdma_destroy_event_channel(channel);
        wake.close();
        eventOut.close();
    }
}
