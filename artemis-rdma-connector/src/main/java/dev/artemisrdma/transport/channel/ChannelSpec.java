package dev.artemisrdma.transport.channel;

import java.util.function.Function;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.flow.BufferPool;
import dev.artemisrdma.transport.wire.Handshake;

/**
 * What the transport decides about a channel before it exists for any other thread, given whole to its constructor
 * (issue 39: a channel is its creating thread's until it is bound to a loop, then the loop's): whether this side
 * states TLS, and on the passive side the acceptor's decisions: the peer's handshake, read from the request; whether
 * the channel takes its receives from its loop's shared pool and whether its window may grow there; the send buffer
 * pool of the device the request came on; and the factory that makes the application's handler once the connection is
 * established (see {@link HandlerSlot}). Immutable.
 *
 * @param speaksTls      this side states TLS in its handshake ({@link Handshake#FEATURE_TLS})
 * @param peer           the peer's handshake (passive side); null on the active side, which learns it when connect
 *                       returns
 * @param sharesReceives the channel takes its receives from the loop's shared pool (a peer that accepts credit
 *                       growth, on a device that shares)
 * @param windowGrows    on the shared pool: the peer answers recalls, so its window may grow
 * @param pool           the send buffer pool of the request's device (passive side); null: chosen at bind
 * @param handlerFactory makes the handler once established (passive side); null: the handler is given
 */
public record ChannelSpec(boolean speaksTls, Handshake.Params peer, boolean sharesReceives, boolean windowGrows,
                          BufferPool pool, Function<RdmaChannel, ChannelHandler> handlerFactory) {

    /** The active side's: the peer and the pool are learnt later, the handler is the caller's. */
    public static ChannelSpec connecting(boolean speaksTls) {
        return new ChannelSpec(speaksTls, null, false, false, null, null);
    }
}
