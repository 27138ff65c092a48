/*
 * Fakes a listening rdma_cm id (rdma_listen): bound in the fabric's listener registry. Enforces EADDRINUSE on rebind;
 * loses its binding on device removal or address change and re-binds through {@link ListenerRecovery}. State: the
 * registry is a concurrent map; {@code closedByUser} is volatile; recovery runs on the fabric's timer thread.
 */
package dev.artemisrdma.transport;

import java.net.InetSocketAddress;

import dev.artemisrdma.transport.fabric.Addressing;
import dev.artemisrdma.transport.fabric.ConnectionRequestHandler;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.FabricListener;
import dev.artemisrdma.transport.fabric.ListenerRecovery;

final class FakeListener implements FabricListener {
    private final FakeFabric fabric;
    final InetSocketAddress address;
    final ConnectionRequestHandler handler;
    /** Its ACK timeout sets the budget of the queue pairs it accepts. */
    final Addressing addressing;
    final ListenerRecovery recovery;
    volatile boolean closedByUser;

    FakeListener(FakeFabric fabric, InetSocketAddress address, ConnectionRequestHandler handler,
                 Addressing addressing) {
        this.fabric = fabric;
        this.address = address;
        this.handler = handler;
        this.addressing = addressing;
        this.recovery = new ListenerRecovery("listener " + RdmaTransport.describe(address), fabric.recoveryTimer,
                this::rebind);
    }

    void lose(String reason) {
        if (fabric.listeners.remove(address, this)) {
            recovery.lost(reason);
        }
    }

    private void rebind() throws FabricException {
        if (closedByUser) {
            return;
        }
        fabric.requireDevice(address);
        if (fabric.listeners.putIfAbsent(address, this) != null) {
            throw new FabricException("rdma_bind_addr " + address + ": address in use (EADDRINUSE)");
        }
        fabric.listensBound.incrementAndGet();
    }

    @Override
    public InetSocketAddress localAddress() {
        return address;
    }

    @Override
    public void close() {
        closedByUser = true;
        recovery.cancel();
        fabric.listeners.remove(address, this);
    }
}
