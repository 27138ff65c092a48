package dev.artemisrdma.transport;

import java.util.concurrent.Executor;
import java.util.concurrent.ScheduledExecutorService;

import dev.artemisrdma.transport.api.ChannelHandler;
import dev.artemisrdma.transport.api.RdmaChannel;
import dev.artemisrdma.transport.api.TlsEngineFactory;
import dev.artemisrdma.transport.tls.TlsChannel;

/**
 * A TLS listener's {@link ChannelAcceptor}: admits as the application's does, and answers each established connection
 * with a {@link TlsChannel} that offers it to the application's acceptor once the TLS handshake is done, so that a
 * peer that fails or stalls its handshake costs the application nothing.
 */
final class TlsListening implements ChannelAcceptor {

    private final ChannelAcceptor application;
    private final TlsEngineFactory tls;
    private final ScheduledExecutorService timer;
    private final Executor closers;

    TlsListening(ChannelAcceptor application, TlsEngineFactory tls, ScheduledExecutorService timer,
                 Executor closers) {
        this.application = application;
        this.tls = tls;
        this.timer = timer;
        this.closers = closers;
    }

    @Override
    public void admit(RdmaChannel channel) {
        application.admit(channel);
    }

    @Override
    public ChannelHandler onAccepted(RdmaChannel channel) {
        return TlsChannel.forListener(channel, tls, application::onAccepted, timer, closers);
    }
}
