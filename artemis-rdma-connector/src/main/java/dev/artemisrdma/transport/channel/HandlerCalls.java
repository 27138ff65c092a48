package dev.artemisrdma.transport.channel;

import java.nio.ByteBuffer;
import org.slf4j.Logger;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.fabric.Endpoints;
import dev.artemisrdma.transport.fabric.FabricException;

/**
 * One job: the channel's calls into its application handler, never under the channel's lock: the making of a
 * passive side's handler once established ({@link #ready}), each frame ({@link #deliver}), the end of a batch and
 * writability ({@link #callbacks}), and the close notice, once ({@link #notifyClosed}). A callback that fails is
 * logged within a limit (a peer can make a handler fail as often as it likes) and never hurts the channel.
 *
 * <p>Owner: the channel's completion loop thread (or, where no loop polls for the channel any more, the thread that
 * released it, for the close notice). It keeps no state of its own: the handler is {@link HandlerSlot}'s (under its
 * own monitor), and the close notice is taken from the lifecycle under the channel's lock. Logs in
 * {@link ChannelLog}.
 */
final class HandlerCalls extends ChannelPart {

    private static final Logger LOG = ChannelLog.LOG;

    /** The channel as the handler and the transport know it. */
    private final RdmaChannel channel;
    private final ChannelHost transport;
    private final HandlerSlot handler;

    HandlerCalls(ChannelPart core, RdmaChannel channel, ChannelHost transport, HandlerSlot handler) {
        super(core);
        this.channel = channel;
        this.transport = transport;
        this.handler = handler;
    }

    /** See {@link HandlerSlot#makeIfNeeded}; before the channel opens. */
    FabricException ready() {
        return handler.makeIfNeeded(channel, remote, () -> life.state().connecting());
    }

    void deliver(ByteBuffer frame) {
        ChannelHandler h = handler.get();
        if (h == null) {
            return; // a connection that failed before it was established: the application never accepted it
        }
        try {
            h.onFrame(channel, frame);
        } catch (RuntimeException | Error e) {
            if (ChannelLog.HANDLER_FAILED.admit()) {
                LOG.error("channel {} ({}): handler failed on a frame of {} bytes", id, Endpoints.describe(remote),
                        frame.limit(), e);
            }
        }
    }

    void callbacks(boolean delivered, boolean notifyWritable, boolean notifyClosed) {
        ChannelHandler h = handler.get();
        if (h == null) {
            delivered = false; // not established yet: nothing was delivered, nobody is owed writability
            notifyWritable = false;
        }
        try {
            if (delivered && !notifyClosed) {
                h.onEndOfBatch(channel);
            }
            if (notifyWritable) {
                h.onWritable(channel);
            }
        } catch (RuntimeException | Error e) {
            if (ChannelLog.CALLBACK_FAILED.admit()) {
                LOG.error("channel {} ({}): handler callback failed", id, Endpoints.describe(remote), e);
            }
        }
        if (notifyClosed) {
            notifyClosed();
        }
    }

    /** The channel is released: the transport forgets it, closers stop waiting, and the handler hears why, once. */
    void notifyClosed() {
        ChannelLifecycle.ClosedNotice notice;
        lock.lock();
        try {
            notice = life.takeClosedNotice();
        } finally {
            lock.unlock();
        }
        if (notice == null) {
            return;
        }
        transport.channelClosed(channel);
        life.closedNotified();
        ChannelHandler h = handler.takeForNotice();
        if (h != null && !notice.silent()) {
            try {
                h.onClosed(channel, notice.cause());
            } catch (RuntimeException | Error e) {
                if (ChannelLog.ON_CLOSED_FAILED.admit()) {
                    LOG.error("channel {} ({}): onClosed failed", id, Endpoints.describe(remote), e);
                }
            }
        }
    }
}
