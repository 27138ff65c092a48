package dev.artemisrdma.verbs;

/** A native library the binding needs is not installed or cannot be loaded; the message says how to fix it. */
public final class RdmaLibraryMissingException extends RdmaSetupException {

    public RdmaLibraryMissingException(String message, Throwable cause) {
        super(message, cause);
    }
}
