package dev.artemisrdma.artemis;

import java.util.Map;

import dev.artemisrdma.transport.Fabric;
import dev.artemisrdma.transport.FabricException;

/** Adapts the transport protocol ({@code RdmaTransport}) to {@link ChannelTransport}. */
final class TransportAdapter {

    private TransportAdapter() {
    }

    static ChannelTransport open(Fabric fabric, Map<String, Object> settings) throws FabricException {
        // TODO(transport branch): RdmaTransport.create(fabric, TransportConfig.from(settings))
        throw new FabricException("the RDMA transport protocol is not available in this build");
    }
}
