package dev.artemisrdma.artemis;

import java.nio.ByteBuffer;
import java.util.function.Supplier;
import java.util.function.ToLongFunction;

import dev.artemisrdma.transport.ListenerStats;
import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.stats.ChannelGroupStats;
import dev.artemisrdma.transport.stats.LoopStats;

/**
 * The counters of one endpoint (an acceptor, or the connectors of one client connection factory): the transport
 * counters of its channels, kept after they close, and how its listener answered connection requests. Read by the
 * Micrometer meters ({@link RdmaMeters}) and over JMX; nothing here is on the data path except one delegation per
 * callback of {@link #track}.
 *
 * <p>Threads: one per endpoint, shared by the threads that use it. The getters run on whatever thread scrapes
 * (Micrometer, JMX); {@link #add} on the thread that saw the channel established; the {@link #track}ed handler's
 * callbacks on the channel's completion loop. The channel group guards itself ({@link ChannelGroupStats} is
 * synchronized), the listener's stats are a volatile reference set once when the acceptor starts, and the transport
 * is read through the supplier the owner (acceptor or factory) gives.
 */
final class EndpointMetrics implements RdmaTransportMetricsMXBean {

    private final ChannelGroupStats channels = new ChannelGroupStats();
    /** The transport these channels use (shared per settings): its pools and loops are reported. */
    private final Supplier<ChannelTransport> transport;
    private volatile ListenerStats listener;

    EndpointMetrics(Supplier<ChannelTransport> transport) {
        this.transport = transport;
    }

    private LoopStats loopStats() {
        ChannelTransport t = transport.get();
        return t == null ? LoopStats.NONE : t.loopStats();
    }

    /** {@code figure} of the transport, 0 while there is none yet (a client before its first connection). */
    private long ofTransport(ToLongFunction<ChannelTransport> figure) {
        ChannelTransport t = transport.get();
        return t == null ? 0 : figure.applyAsLong(t);
    }

    /** From now on, the connection requests answered by {@code stats} are this endpoint's. */
    void listenerStats(ListenerStats stats) {
        this.listener = stats;
    }

    /** Counts {@code channel} until it closes; the returned handler must be the channel's. */
    ChannelHandler track(ChannelHandler handler) {
        return new Tracked(handler);
    }

    /** Counts an established {@code channel} whose handler came from {@link #track}. */
    void add(RdmaChannel channel) {
        channels.add(channel);
        if (!channel.isOpen()) {
            channels.remove(channel); // closed before it was added: onClosed has already run
        }
    }

    private ChannelGroupStats.Snapshot snapshot() {
        return channels.snapshot();
    }

    @Override
    public long getBytesSent() {
        return snapshot().bytesSent();
    }

    @Override
    public long getBytesReceived() {
        return snapshot().bytesReceived();
    }

    @Override
    public long getFramesSent() {
        return snapshot().framesSent();
    }

    @Override
    public long getFramesReceived() {
        return snapshot().framesReceived();
    }

    @Override
    public long getFramesPacked() {
        return snapshot().framesPacked();
    }

    @Override
    public long getImmediateFragmentsSent() {
        return snapshot().immediateSends();
    }

    @Override
    public int getOlderPeerConnections() {
        return snapshot().olderPeers();
    }

    @Override
    public long getCompletions() {
        return snapshot().completions();
    }

    @Override
    public long getCreditStalls() {
        return snapshot().creditStalls();
    }

    @Override
    public long getRnrRetryErrors() {
        return snapshot().rnrRetryErrors();
    }

    @Override
    public long getRetryErrors() {
        return snapshot().retryErrors();
    }

    @Override
    public long getCompletionErrors() {
        return snapshot().otherErrors();
    }

    @Override
    public long getProtocolErrors() {
        ListenerStats l = listener;
        return snapshot().protocolErrors() + (l == null ? 0 : l.protocolErrors());
    }

    @Override
    public int getConnections() {
        return snapshot().connections();
    }

    @Override
    public long getConnectionsAccepted() {
        ListenerStats l = listener;
        return l == null ? 0 : l.accepted();
    }

    @Override
    public long getConnectionsRefused() {
        ListenerStats l = listener;
        return l == null ? 0 : l.refused();
    }

    @Override
    public long getRegisteredMemoryBytes() {
        return snapshot().registeredBytes();
    }

    @Override
    public long getSendPoolBytes() {
        return ofTransport(ChannelTransport::sendPoolBytes);
    }

    @Override
    public long getSharedReceivePoolBytes() {
        return ofTransport(ChannelTransport::sharedReceivePoolBytes);
    }

    @Override
    public int getSharedReceivePools() {
        return (int) ofTransport(ChannelTransport::sharedReceivePools);
    }

    @Override
    public long getSharedReceiveCreditsRecalled() {
        return ofTransport(ChannelTransport::sharedReceiveCreditsRecalled);
    }

    @Override
    public long getSharedReceiveRecalls() {
        return ofTransport(ChannelTransport::sharedReceiveRecalls);
    }

    @Override
    public long getLoopSpinBudgetExhausted() {
        return loopStats().budgetExhaustedPeriods();
    }

    @Override
    public long getLoopSpins() {
        return loopStats().spins();
    }

    @Override
    public long getLoopSpinHits() {
        return loopStats().spinHits();
    }

    @Override
    public long getLoopSpinNanos() {
        return loopStats().spinNanos();
    }

    @Override
    public long getLoopBlocks() {
        return loopStats().blocks();
    }

    @Override
    public long getLoopWakeUps() {
        return loopStats().wakeUps();
    }

    @Override
    public long getLoopBlockedNanos() {
        return loopStats().blockedNanos();
    }

    @Override
    public long getLoopCpuNanos() {
        return loopStats().cpuNanos();
    }

    @Override
    public int getLoops() {
        return loopStats().loops();
    }

    /** The application's handler, with the channel leaving the group when it closes. */
    private final class Tracked implements ChannelHandler {
        private final ChannelHandler delegate;

        Tracked(ChannelHandler delegate) {
            this.delegate = delegate;
        }

        @Override
        public void onFrame(RdmaChannel channel, ByteBuffer frame) {
            delegate.onFrame(channel, frame);
        }

        @Override
        public void onEndOfBatch(RdmaChannel channel) {
            delegate.onEndOfBatch(channel);
        }

        @Override
        public void onWritable(RdmaChannel channel) {
            delegate.onWritable(channel);
        }

        @Override
        public void onClosed(RdmaChannel channel, FabricException cause) {
            channels.remove(channel);
            delegate.onClosed(channel, cause);
        }
    }
}
