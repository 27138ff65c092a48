package dev.artemisrdma.transport.fabric;

/**
 * An endpoint whose addressing cannot work as configured: an unknown device, a host address that is not on the named
 * device, an address no RDMA device has a route to. Retrying does not help; the message says what to change.
 */
public class AddressingException extends FabricException {

    public AddressingException(String message) {
        super(message);
    }

    public AddressingException(String message, Throwable cause) {
        super(message, cause);
    }
}
