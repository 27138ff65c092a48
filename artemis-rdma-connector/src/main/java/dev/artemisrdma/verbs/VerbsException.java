package dev.artemisrdma.verbs;

import java.io.IOException;

/**
 * A verb failed. The message names the verb, the errno symbol and its text, e.g.
 * {@code rdma_post_sendv failed: ENOMEM (Cannot allocate memory)}, plus what it was doing when known.
 */
public class VerbsException extends IOException {

    private final String verb;
    private final int errno;

    public VerbsException(String verb, int errno, String context) {
        super(verb + " failed: " + Errno.describe(errno) + (context == null || context.isEmpty() ? "" : " " + context));
        this.verb = verb;
        this.errno = errno;
    }

    /** A failure that is not an errno (a state or validation problem found before any native call). */
    public VerbsException(String message) {
        super(message);
        this.verb = null;
        this.errno = 0;
    }

    public String verb() {
        return verb;
    }

    public int errno() {
        return errno;
    }

    /** For C functions that return -1 and set errno. */
    static VerbsException fromErrno(String verb, String context) {
        return new VerbsException(verb, Errno.last(), context);
    }
}
