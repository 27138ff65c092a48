package dev.artemisrdma.transport.channel;

import java.net.InetSocketAddress;
import java.util.concurrent.locks.ReentrantLock;

import dev.artemisrdma.transport.config.TransportConfig;

/**
 * What every part of one channel works on: its name and peer, its configuration, its lock, and the parts below the
 * wiring (the send and receive sides, the shared-pool membership, the native resources, the lifecycle). The wiring
 * ({@link RdmaChannelImpl}) makes one as the channel's core, and each part that serves one kind of caller
 * ({@link WritePath}, {@link LoopSide}, {@link QueuePairSetup}, {@link SetupOutcome}, {@link HandlerCalls},
 * {@link PublishedMeasures}) is one, made from it: the references are copied into the part's own final fields, so a
 * part reads them as it read its own before the channel was split (no hop on the data path).
 *
 * <p>Owner: none; final references, set before the channel is published to any other thread. Each part referenced
 * says who owns it; all but the receive side are guarded by {@link #lock}.
 */
class ChannelPart {

    final String id;
    final InetSocketAddress remote;
    final TransportConfig config;
    /** The channel's one lock, shared by all its parts (the fabric forbids concurrent posts on one queue pair). */
    final ReentrantLock lock;
    final SendSide send;
    final ReceiveSide receive;
    final SharedReceiveMembership shared;
    final ChannelResources resources;
    final ChannelLifecycle life;

    /** The channel's core, made by the wiring. */
    ChannelPart(String id, InetSocketAddress remote, TransportConfig config, ReentrantLock lock, SendSide send,
                ReceiveSide receive, SharedReceiveMembership shared, ChannelResources resources,
                ChannelLifecycle life) {
        this.id = id;
        this.remote = remote;
        this.config = config;
        this.lock = lock;
        this.send = send;
        this.receive = receive;
        this.shared = shared;
        this.resources = resources;
        this.life = life;
    }

    /** A part of the channel whose core is {@code core}. */
    ChannelPart(ChannelPart core) {
        this(core.id, core.remote, core.config, core.lock, core.send, core.receive, core.shared, core.resources,
                core.life);
    }
}
