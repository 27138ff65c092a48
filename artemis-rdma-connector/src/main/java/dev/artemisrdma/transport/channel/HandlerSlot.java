package dev.artemisrdma.transport.channel;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.function.BooleanSupplier;
import java.util.function.Function;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.fabric.Endpoints;
import dev.artemisrdma.transport.fabric.FabricException;

/**
 * A channel's handler, and on the passive side the making of it once the connection is established, not when the
 * request arrives: a peer that never finishes connecting costs the application nothing (for Artemis, no
 * {@code Connection}).
 *
 * <p>Two threads can see a passive connection established (the connection-manager thread with rdma_cm's
 * ESTABLISHED, the completion loop with the peer's first frame), but only the loop makes the handler: the
 * connection-manager thread hands its event to the loop ({@link ChannelCommands}), since it serves every connection
 * of the fabric and must never wait for the application (issue 37, hole 6: a slow Artemis connection plugin held
 * every CM event). Another thread may be releasing the channel (a handshake deadline, a close): this monitor makes the
 * close notice agree with the making: a handler is made only while the channel is still connecting and the notice
 * not taken, so no handler misses its onClosed and none is made for a channel already gone. Reads of the handler
 * are one volatile read.
 */
final class HandlerSlot {

    /** Stands in for a handler the application refused to make: the channel is failing, what arrives is dropped. */
    private static final ChannelHandler REFUSED = new ChannelHandler() {
        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
        }
    };

    private volatile ChannelHandler handler;
    /** Passive side: makes the handler once established; null on the active side (its handler is given). */
    private final Function<RdmaChannel, ChannelHandler> factory;
    /** The close notice was taken (under this monitor): no handler may be made any more. */
    private boolean noticeTaken;

    /** {@code given}: the active side's handler; {@code factory}: the passive side's, made once established. */
    HandlerSlot(ChannelHandler given, Function<RdmaChannel, ChannelHandler> factory) {
        this.handler = given;
        this.factory = factory;
    }

    /** The handler, or null while a passive connection is not established (or was released before it was). */
    ChannelHandler get() {
        return handler;
    }

    /**
     * Makes the handler if it is still to be made, before the channel opens; on the channel's loop thread (a
     * thread closing the channel meanwhile waits here for it before it takes the notice). Returns the refusal when the application refused (returned null or
     * threw): the channel then opens with a handler that drops frames, and must fail at once with that cause.
     * Makes nothing when the channel stopped connecting meanwhile ({@code connecting} false): the application never
     * hears of it.
     */
    FabricException makeIfNeeded(RdmaChannel channel, InetSocketAddress remote, BooleanSupplier connecting) {
        if (handler != null || factory == null) {
            return null;
        }
        synchronized (this) {
            if (handler != null || noticeTaken || !connecting.getAsBoolean()) {
                return null;
            }
            ChannelHandler made = null;
            Throwable thrown = null;
            try {
                made = factory.apply(channel);
            } catch (RuntimeException | Error e) {
                thrown = e;
            }
            if (made != null) {
                handler = made;
                return null;
            }
            handler = REFUSED;
            // logged as the channel fails, within that log's limit
            return new FabricException("channel " + channel.id() + ": the connection from "
                    + Endpoints.describe(remote) + " was refused by the application once established"
                    + (thrown == null ? "" : ": " + thrown.getMessage()), thrown);
        }
    }

    /** The close notice is being delivered: the handler to tell (null: none was made), and none is made after. */
    synchronized ChannelHandler takeForNotice() {
        noticeTaken = true;
        return handler;
    }
}
