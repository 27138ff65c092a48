package dev.artemisrdma.verbs;

/**
 * This machine cannot run RDMA as configured (library missing, no device, memory lock limit, ABI mismatch).
 * The message says what is wrong and what to do about it.
 */
public class RdmaSetupException extends RuntimeException {

    public RdmaSetupException(String message) {
        super(message);
    }

    public RdmaSetupException(String message, Throwable cause) {
        super(message, cause);
    }
}
