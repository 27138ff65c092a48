package dev.artemisrdma.transport.channel;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.event.Level;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.fabric.Endpoints;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.LogLimiter;

/**
 * One job: the channel's calls into its application handler, never under the channel's lock: the making of a
 * passive side's handler once established ({@link #ready}), each frame ({@link #deliver}), the end of a batch and
 * writability ({@link #callbacks}), and the close notice, once ({@link #notifyClosed}). A callback that fails is
 * logged within a limit (a peer can make a handler fail as often as it likes) and never hurts the channel.
 *
 * <p>Owner: the channel's completion loop thread (or, where no loop polls for the channel any more, the thread that
 * released it, for the close notice). It keeps no state of its own: the handler is {@link HandlerSlot}'s (under its
 * own monitor), and the close notice is taken from the lifecycle under the channel's lock. Logs under
 * {@code RdmaChannelImpl}'s category, as before the channel was split into parts.
 */
final class HandlerCalls {

    private static final Logger LOG = LoggerFactory.getLogger(RdmaChannelImpl.class);
    private static final LogLimiter HANDLER_FAILED = LogLimiter.site(LOG, Level.ERROR,
            "frames the handler failed on");
    // the application's other callbacks may fail on what a peer sent (onEndOfBatch after its frames), or on every
    // connection a peer opens and closes (onClosed): as often as the peer likes (issue 37, hole 7)
    private static final LogLimiter CALLBACK_FAILED = LogLimiter.site(LOG, Level.ERROR,
            "handler callbacks (end of batch, writable) that failed");
    private static final LogLimiter ON_CLOSED_FAILED = LogLimiter.site(LOG, Level.ERROR,
            "onClosed callbacks that failed");

    /** The channel as the handler and the transport know it. */
    private final RdmaChannel channel;
    private final ChannelHost transport;
    private final HandlerSlot handler;
    private final ReentrantLock lock;
    private final ChannelLifecycle life;
    private final String id;
    private final InetSocketAddress remote;

    HandlerCalls(RdmaChannel channel, ChannelHost transport, HandlerSlot handler, ReentrantLock lock,
                 ChannelLifecycle life, String id, InetSocketAddress remote) {
        this.channel = channel;
        this.transport = transport;
        this.handler = handler;
        this.lock = lock;
        this.life = life;
        this.id = id;
        this.remote = remote;
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
            if (HANDLER_FAILED.admit()) {
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
            if (CALLBACK_FAILED.admit()) {
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
                if (ON_CLOSED_FAILED.admit()) {
                    LOG.error("channel {} ({}): onClosed failed", id, Endpoints.describe(remote), e);
                }
            }
        }
    }
}
