package dev.artemisrdma.transport;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import dev.artemisrdma.transport.config.TransportConfig;
import dev.artemisrdma.transport.fabric.DeviceLimits;
import dev.artemisrdma.transport.fabric.DeviceTransport;
import dev.artemisrdma.transport.fabric.FabricDevice;
import dev.artemisrdma.transport.fabric.FabricException;
import dev.artemisrdma.transport.fabric.QueuePairRefusedException;
import dev.artemisrdma.transport.fabric.QueuePairSpec;

/**
 * What one transport asks of one RDMA device, fitted to what the device allows: ask the device, then fit. Real NICs
 * refuse our defaults in different places (siw allows 80 inline bytes, Intel E810 101 and no shared receive queue,
 * iWARP no immediate data, AWS EFA no reliable-connected queue pairs at all), so every queue pair a connection asks
 * for passes {@link #fit} first:
 * <ul>
 *   <li>a device without reliable-connected queue pairs is refused by name;</li>
 *   <li>depths and scatter-gather entries beyond the device's limits are refused, naming the key and the limit;</li>
 *   <li>inline bytes: a fitted maxInlineData (unset, {@code auto}) asks as many as the device allows up to 256; a
 *       number the device cannot meet is refused naming its limit. Where the device's limit is unknown, or a
 *       provider refuses less than it reported (ibv_create_qp's EINVAL says no maximum), {@link #afterRefusal} asks
 *       again with less and remembers it for every later queue pair on the device;</li>
 *   <li>{@link #sharesReceives}: accepted connections share receive queues only where the device has them.</li>
 * </ul>
 * Shared by the threads that create queue pairs (rdma_cm's event thread and connecting threads): its one learned
 * figure is atomic, its log lines say each thing once.
 */
final class DeviceFit {

    private static final Logger LOG = LoggerFactory.getLogger(DeviceFit.class);

    /** Inline sizes tried, largest first, after a refusal: real devices' limits among them (E810 101, siw 80, X722 48). */
    private static final int[] INLINE_LADDER = {224, 192, 160, 128, 112, 101, 96, 80, 64, 48, 32, 16, 0};

    private final String transportName;
    private final String device;
    private final DeviceLimits limits;
    private final TransportConfig config;
    /** The most inline bytes to ask: the device's reported limit, lowered by every refusal seen. */
    private final AtomicInteger inlineCeiling;
    private final AtomicBoolean inlineLogged = new AtomicBoolean();
    private final AtomicBoolean ownQueuesLogged = new AtomicBoolean();

    DeviceFit(String transportName, FabricDevice device, TransportConfig config) {
        this.transportName = transportName;
        this.device = device.name();
        this.limits = device.limits();
        this.config = config;
        int reported = limits.maxInlineData();
        this.inlineCeiling = new AtomicInteger(reported < 0 ? Integer.MAX_VALUE : reported);
    }

    /**
     * {@code asked}, fitted to the device.
     *
     * @throws FabricException naming the key and the device's limit where the device cannot meet what the
     *                         configuration states, or the device when it has no reliable-connected queue pairs
     */
    QueuePairSpec fit(QueuePairSpec asked) throws FabricException {
        if (limits.transport() == DeviceTransport.NO_RELIABLE_CONNECTION) {
            throw new FabricException("RDMA device " + device + " has " + limits.transport().label() + " (AWS EFA "
                    + "offers SRD only, usNIC UDP): artemis-rdma needs reliable-connected queue pairs, as InfiniBand,"
                    + " RoCE and iWARP devices have; choose another device (the device key) or use tcp://");
        }
        if (asked.maxSendWr() > limits.maxQpWr()) {
            throw new FabricException("sendQueueDepth=" + asked.maxSendWr() + " is more than RDMA device " + device
                    + " allows (max_qp_wr " + limits.maxQpWr() + "): lower sendQueueDepth");
        }
        if (asked.sharedReceiveQueue() == null && asked.maxRecvWr() > limits.maxQpWr()) {
            throw new FabricException("receiveSlots: " + asked.maxRecvWr() + " posted receives are more than RDMA "
                    + "device " + device + " allows (max_qp_wr " + limits.maxQpWr() + "): lower receiveSlots");
        }
        if (Math.max(asked.maxSendSge(), asked.maxRecvSge()) > limits.maxSge()) {
            throw new FabricException("RDMA device " + device + " allows " + limits.maxSge() + " scatter-gather "
                    + "entries per work request; the transport's SENDs need " + asked.maxSendSge());
        }
        int ceiling = inlineCeiling.get();
        if (asked.maxInlineData() <= ceiling) {
            return asked;
        }
        if (!config.inlineFitted()) {
            throw new FabricException("maxInlineData=" + asked.maxInlineData() + " is more than RDMA device " + device
                    + " allows (" + ceiling + " inline bytes): lower maxInlineData, or remove it to fit the device");
        }
        logInlineOnce(ceiling, "allows");
        return asked.withMaxInlineData(ceiling);
    }

    /**
     * The device refused {@code refused} with EINVAL: the same ask with fewer inline bytes, or null when nothing is
     * left to lower. Nothing is remembered until a smaller ask succeeds ({@link #accepted}): an EINVAL for another
     * reason must not lower the inline size of every later connection.
     *
     * @throws FabricException naming maxInlineData when the user set it and the device refused it
     */
    QueuePairSpec afterRefusal(QueuePairSpec refused, QueuePairRefusedException why) throws FabricException {
        int was = refused.maxInlineData();
        if (was == 0) {
            return null; // not the inline size: the refusal stands as the device said it
        }
        if (!config.inlineFitted()) {
            throw new FabricException("maxInlineData=" + was + ": RDMA device " + device + " refused a queue pair "
                    + "asking " + was + " inline bytes (" + why.getMessage() + "): lower maxInlineData, or remove it "
                    + "to fit the device", why);
        }
        for (int step : INLINE_LADDER) {
            if (step < was) {
                return refused.withMaxInlineData(step);
            }
        }
        return null;
    }

    /**
     * A queue pair asking {@code inline} bytes was created after the device refused more: later queue pairs on this
     * device ask no more than that.
     */
    void accepted(int inline, String refusal) {
        int lowered = inlineCeiling.accumulateAndGet(inline, Math::min);
        logInlineOnce(lowered, "refused more (" + refusal + "); it accepts");
    }

    private void logInlineOnce(int inline, String what) {
        if (inlineLogged.compareAndSet(false, true)) {
            LOG.info("{}: RDMA device {} ({}) {} {} inline bytes: SENDs of up to {} bytes go inline, larger ones by "
                    + "DMA", transportName, device, limits.transport().label(), what, inline, inline);
        }
    }

    /**
     * Whether connections accepted on this device share their loop's receive queue: sharedReceiveQueue, where the
     * device has shared receive queues deep enough for sharedReceiveSlots. Otherwise each keeps its own (logged
     * once, with what that costs).
     */
    boolean sharesReceives() {
        if (!config.sharedReceiveQueue()) {
            return false;
        }
        String why = !limits.hasSharedReceiveQueues() ? "has no shared receive queues"
                : config.sharedReceiveSlots() > limits.maxSrqWr() ? "holds at most " + limits.maxSrqWr()
                + " receives in a shared receive queue, sharedReceiveSlots asks " + config.sharedReceiveSlots()
                : null;
        if (why != null && ownQueuesLogged.compareAndSet(false, true)) {
            LOG.info("{}: RDMA device {} {}: each accepted connection keeps its own receive queue ({} KiB registered "
                    + "per connection)", transportName, device, why,
                    config.registeredBytesPerConnection(false) >> 10);
        }
        return why == null;
    }
}
