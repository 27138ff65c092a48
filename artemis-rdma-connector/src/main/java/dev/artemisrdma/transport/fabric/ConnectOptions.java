package dev.artemisrdma.transport.fabric;

import java.time.Duration;

/**
 * Parameters of an active connect.
 *
 * @param privateData     handshake bytes for the peer (at most 56 over RDMA_PS_TCP)
 * @param rnrRetryCount   how the peer's sends to us are retried when we have no receive posted (0..7, 7 = forever)
 * @param retryCount      transport retries on lost packets (0..7)
 * @param timeout         bound on address/route resolution plus the handshake
 * @param addressing      the device the connection must leave from and its type of service
 */
public record ConnectOptions(byte[] privateData, int rnrRetryCount, int retryCount, Duration timeout,
                             Addressing addressing) {

    /** Options on any device with the kernel's type of service. */
    public ConnectOptions(byte[] privateData, int rnrRetryCount, int retryCount, Duration timeout) {
        this(privateData, rnrRetryCount, retryCount, timeout, Addressing.ANY);
    }

    public ConnectOptions {
        if (privateData == null) {
            privateData = new byte[0];
        }
        if (privateData.length > 56) {
            throw new IllegalArgumentException("connect private data is limited to 56 bytes, got " + privateData.length);
        }
        if (rnrRetryCount < 0 || rnrRetryCount > 7) {
            throw new IllegalArgumentException("rnrRetryCount must be 0..7, got " + rnrRetryCount);
        }
        if (retryCount < 0 || retryCount > 7) {
            throw new IllegalArgumentException("retryCount must be 0..7, got " + retryCount);
        }
        if (timeout == null || timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive");
        }
        if (addressing == null) {
            addressing = Addressing.ANY;
        }
    }
}
