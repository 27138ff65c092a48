package dev.artemisrdma.transport.fabric;

import java.time.Duration;
import java.util.List;

/**
 * Where an endpoint's connections may run and how they are marked and timed: the RDMA device they must use, the
 * RoCE type of service (IP TOS / traffic class) of their packets and the local ACK timeout of their queue pairs.
 * Validated here so that every {@link Fabric} can trust it.
 *
 * @param device     the RDMA device name ({@code rxe0}, {@code mlx5_0}); null lets rdma_cm pick it from the route
 * @param tos        0..255, set with rdma_set_option(RDMA_OPTION_ID_TOS); {@link #DEFAULT_TOS} leaves the kernel's
 *                   default (the route's, usually 0)
 * @param ackTimeout 1..31, the local ACK timeout exponent (4.096 us x 2^ackTimeout), set with
 *                   rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT) on every connection's id, both sides; with the retry
 *                   count it makes a connection's {@link #retryBudget retry budget}
 */
public record Addressing(String device, int tos, int ackTimeout) {

    /** No type of service set: rdma_set_option is not called. */
    public static final int DEFAULT_TOS = -1;
    /**
     * 4.096 us x 2^17 = 0.537 s: about what rdma_cm derives for RoCE by itself (packet lifetime 16 gives 17 to 18),
     * set explicitly so that the retry budget is known here rather than guessed.
     */
    public static final int DEFAULT_ACK_TIMEOUT = 17;
    /**
     * The retry count an accepted connection's budget is computed with. rdma_accept is passed 7, but on IB and RoCE
     * the kernel's CM gives the accepting queue pair the retry count of the connect request (the peer's
     * retryCount); 7 is the most a peer can ask, so the budget assumed here is never shorter than the real one.
     */
    public static final int ACCEPTED_RETRY_COUNT = 7;
    /** Any device, the kernel's type of service, the default ACK timeout. */
    public static final Addressing ANY = new Addressing(null, DEFAULT_TOS);
    /** IB_DEVICE_NAME_MAX is 64 including the terminating NUL. */
    private static final int MAX_DEVICE_NAME = 63;
    /** The unit of the ACK timeout: 4.096 us. */
    private static final long ACK_TIMEOUT_UNIT_NANOS = 4096;

    /** A device and type of service with the {@link #DEFAULT_ACK_TIMEOUT default ACK timeout}. */
    public Addressing(String device, int tos) {
        this(device, tos, DEFAULT_ACK_TIMEOUT);
    }

    public Addressing {
        if (device != null && (device.isBlank() || device.length() > MAX_DEVICE_NAME
                || !device.chars().allMatch(c -> c > ' ' && c < 127 && c != '/'))) {
            throw new IllegalArgumentException("device: not an RDMA device name: '" + device + "' (1.."
                    + MAX_DEVICE_NAME + " printable characters, as 'rdma link' lists them, e.g. rxe0 or mlx5_0)");
        }
        if (tos != DEFAULT_TOS) {
            requireTos(tos);
        }
        requireAckTimeout(ackTimeout);
    }

    /** A type of service as a user gives it: 0..255 only (leaving the key out keeps the kernel's). */
    public static int requireTos(int tos) {
        if (tos < 0 || tos > 255) {
            throw new IllegalArgumentException("tos: must be 0..255 (the IP type of service byte: DSCP << 2 | ECN, "
                    + "e.g. 106 for DSCP 26 with ECN capable), got " + tos);
        }
        return tos;
    }

    /**
     * An ACK timeout exponent as a user gives it: 1..31. 0 is refused: the verbs take it as no timeout at all, so a
     * dead peer or link would never be reported by the queue pair.
     */
    public static int requireAckTimeout(int ackTimeout) {
        if (ackTimeout < 1 || ackTimeout > 31) {
            throw new IllegalArgumentException("ackTimeout: must be 1..31 (the local ACK timeout 4.096 us x "
                    + "2^ackTimeout: 14 is 67 ms, 17 is 537 ms, 20 is 4.3 s; 0 would turn the timer off and leave a "
                    + "dead peer unnoticed), got " + ackTimeout);
        }
        return ackTimeout;
    }

    /** The local ACK timeout: 4.096 us x 2^ackTimeout. */
    public Duration ackTimeoutDuration() {
        return Duration.ofNanos(ACK_TIMEOUT_UNIT_NANOS << ackTimeout);
    }

    /**
     * How long a queue pair with {@code retryCount} retries goes on sending without an acknowledgement before it
     * reports IBV_WC_RETRY_EXC_ERR: (retryCount + 1) x 4.096 us x 2^ackTimeout (7 x 0.537 s = 3.8 s at the default
     * retryCount 6, 8 x 0.537 s = 4.3 s at 7). On Soft-RoCE (rxe) a retry count of 7 means for ever: such a queue
     * pair never reports the error.
     */
    public Duration retryBudget(int retryCount) {
        if (retryCount < 0 || retryCount > 7) {
            throw new IllegalArgumentException("retryCount must be 0..7, got " + retryCount);
        }
        return ackTimeoutDuration().multipliedBy(retryCount + 1L);
    }

    public boolean hasDevice() {
        return device != null;
    }

    public boolean hasTos() {
        return tos != DEFAULT_TOS;
    }

    /**
     * Refuses a device name that is not among {@code present}, listing them.
     *
     * @throws AddressingException naming the device, the devices present and where to look
     */
    public void requireKnownDevice(List<String> present) throws AddressingException {
        if (device != null && !present.contains(device)) {
            throw new AddressingException("no RDMA device named '" + device + "'; devices present: " + present
                    + " (see 'rdma link'); fix the device parameter or leave it out to let the route choose");
        }
    }

    @Override
    public String toString() {
        return (device == null ? "any device" : "device " + device) + (hasTos() ? ", tos " + tos : "")
                + (ackTimeout != DEFAULT_ACK_TIMEOUT ? ", ackTimeout " + ackTimeout : "");
    }
}
