package dev.artemisrdma.transport.channel;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.loop.CompletionLoop;
import dev.artemisrdma.transport.loop.LoopChannel;
import dev.artemisrdma.transport.loop.Mailbox;
import dev.artemisrdma.transport.wire.Handshake;

/**
 * What other threads ask of a channel, carried to its completion loop, which alone carries it out (Aeron's proxy:
 * the asking thread offers, the owner applies): rdma_cm's ESTABLISHED and DISCONNECTED (the connection manager's
 * thread, or the device's event thread), the handshake deadline (the transport's timer), close and forceClose (any
 * thread), and the outcome of the connection's set-up (the connecting caller, or rdma_cm's thread for an accept):
 * connect returned with the peer's accept, or connect, accept or the accept reply failed; and a writer's failure (a
 * post refused on its thread, its outbox over the cap). Each is one bit of the channel's {@link Mailbox}, and what it
 * carries (the reason, the deadline, the peer's handshake) waits here beside it; the loop runs them in
 * {@link LoopSide#runCommands}, in the order documented there.
 *
 * <p>Where they run. On the loop thread: at its next tick (the post wakes it), or ahead of the channel's next batch
 * of completions ({@link #runPending}). Called on the loop thread itself (a handler that closes its channel), a
 * request runs at once, as a direct call would. Where no loop polls for the channel (it is not bound yet, or its loop
 * has ended or died and refuses the post), the asking thread runs it, under the channel's lock, as before the loop
 * owned it.
 *
 * <p>Threads: any thread asks; the fields are written before the post that publishes them. {@link #closeAsked} is
 * the writers' gate: set by the closing thread before it asks, never cleared, so that a write after close() is
 * refused even before the loop has run the close.
 */
final class ChannelCommands {

    /** rdma_cm said ESTABLISHED: the handler is made (passive side) and the channel opens. */
    static final int ESTABLISHED = 1;
    /** The handshake deadline passed: the channel is torn down unless it opened. */
    static final int HANDSHAKE_EXPIRED = 1 << 1;
    /** rdma_cm said DISCONNECTED (or the device's event did): the drain begins, the peer's last frames delivered. */
    static final int DISCONNECTED = 1 << 2;
    /** An orderly close. */
    static final int CLOSE = 1 << 3;
    /** An immediate close. */
    static final int FORCE_CLOSE = 1 << 4;
    /** Active side: connect returned with the peer's accept ({@link Connected}): its handshake applied, it opens. */
    static final int CONNECTED = 1 << 5;
    /** Connect or accept failed, or the accept reply was not acceptable ({@link SetupFailure}): the channel goes. */
    static final int SETUP_FAILED = 1 << 6;
    /**
     * A writer met a failure (a refused post, the outbox over its cap), recorded in the lifecycle
     * ({@link ChannelLifecycle#writerFailed}): the channel fails with it.
     */
    static final int WRITER_FAILED = 1 << 7;

    private final LoopChannel channel;
    private final ChannelResources resources;
    private final Mailbox mailbox;
    /**
     * The first disconnect's reason: the one the channel would have heard first (a device's port event before the
     * "peer disconnected" that our own disconnect, which it caused, brings back); later ones change nothing.
     */
    private final AtomicReference<String> disconnectReason = new AtomicReference<>();
    private volatile HandshakeDeadline expiry;
    private volatile boolean closeAsked;
    /** The connecting caller's request; one thread asks it, once. */
    private volatile Connected connected;
    /** The set-up's failure; its one thread (the connecting caller, or the accepting one) asks it, once. */
    private volatile SetupFailure setupFailure;

    ChannelCommands(LoopChannel channel, ChannelResources resources) {
        this.channel = channel;
        this.resources = resources;
        this.mailbox = new Mailbox(channel);
    }

    void established() {
        post(ESTABLISHED);
    }

    void disconnected(String reason) {
        disconnectReason.compareAndSet(null, reason);
        post(DISCONNECTED);
    }

    void handshakeExpired(HandshakeDeadline deadline) {
        expiry = deadline;
        post(HANDSHAKE_EXPIRED);
    }

    void close() {
        closeAsked = true;
        post(CLOSE);
    }

    void forceClose() {
        closeAsked = true;
        post(FORCE_CLOSE);
    }

    /**
     * Connect returned with the peer's accept: returns the request, on which the caller waits for the loop's verdict
     * ({@link Connected#await}): the loop, not the caller, applies the peer's handshake and opens the channel.
     */
    Connected connected(Handshake.Params peer) {
        Connected c = new Connected(peer);
        connected = c;
        post(CONNECTED);
        return c;
    }

    /**
     * A writer's failure was recorded ({@link ChannelLifecycle#writerFailed} returned true): the loop fails the
     * channel. Called after the writer released the channel's lock, since a loop that refuses the request leaves it
     * to this thread, and a close must not run under a writer's lock.
     */
    void writerFailed() {
        post(WRITER_FAILED);
    }

    void setupFailed(SetupFailure failure) {
        setupFailure = failure;
        post(SETUP_FAILED);
    }

    Connected connected() {
        return connected;
    }

    SetupFailure setupFailure() {
        return setupFailure;
    }

    /** A close or forceClose was asked for: no write is taken any more (any thread, one volatile read). */
    boolean closeAsked() {
        return closeAsked;
    }

    String disconnectReason() {
        return disconnectReason.get();
    }

    HandshakeDeadline expiry() {
        return expiry;
    }

    /**
     * Loop thread, ahead of a batch of the channel's completions: runs what is pending now, so that the completions
     * meet the channel as the events before them left it (rdma_cm's ESTABLISHED before the peer's first frames, a
     * DISCONNECTED before the flushes it explains). One volatile read when nothing is pending.
     */
    boolean runPending() {
        return mailbox.pending() && channel.runCommands(mailbox.take());
    }

    /** Whether requests wait for the loop (tests). */
    boolean pending() {
        return mailbox.pending();
    }

    /**
     * Carries {@code request} to the loop; see the class comment for where it runs. The thread that marks the
     * mailbox queued is the one that must see it run: posted, or run here when the loop refuses it.
     */
    private void post(int request) {
        CompletionLoop loop = resources.loop();
        boolean onLoop = loop != null && loop.isLoopThread();
        if (mailbox.add(request)) {
            if (loop != null && !onLoop && loop.post(mailbox)) {
                return;
            }
            channel.runCommands(mailbox.takeAll());
        } else if (onLoop) {
            channel.runCommands(mailbox.take()); // queued in the inbox too, where the loop will find nothing left
        }
    }

    /**
     * CONNECTED's datum and its answer: the peer's handshake, and what applying it threw (null: applied, the channel
     * opened, or goes on closing). The connecting caller waits for the answer on its own thread, never the loop's:
     * the loop answers as it runs the request, and a loop that dies or stops runs what it was given first.
     */
    static final class Connected {
        private final Handshake.Params peer;
        private final CountDownLatch answered = new CountDownLatch(1);
        private volatile FabricException refused;

        Connected(Handshake.Params peer) {
            this.peer = peer;
        }

        Handshake.Params peer() {
            return peer;
        }

        /** The loop's verdict (or the asking thread's, where no loop runs the request); once. */
        void answer(FabricException why) {
            refused = why;
            answered.countDown();
        }

        /**
         * Waits up to {@code nanos} for the verdict and throws what applying the handshake threw, as the caller's own
         * call would have; returns when the channel opened (or a close goes on). {@code late}: the failure thrown when
         * the loop, busy in a handler, did not answer in time.
         */
        void await(long nanos, Supplier<FabricException> late) throws FabricException {
            try {
                if (!answered.await(nanos, TimeUnit.NANOSECONDS)) {
                    throw late.get();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new FabricException(late.get().getMessage() + " (interrupted)", e);
            }
            FabricException why = refused;
            if (why != null) {
                throw why;
            }
        }
    }

    /**
     * SETUP_FAILED's datum: why, whether the handler is told ({@code tellHandler}; the caller of connect gets the
     * exception instead), and whether the connection was up ({@code connected}: the accept reply was not
     * acceptable, so it is torn down properly, drained; else its queue pair goes at once).
     */
    record SetupFailure(FabricException cause, boolean tellHandler, boolean connected) {
    }
}
