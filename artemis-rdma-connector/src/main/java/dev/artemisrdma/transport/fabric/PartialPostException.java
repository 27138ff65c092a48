package dev.artemisrdma.transport.fabric;

/**
 * A post of a list failed part-way: the first {@link #posted()} work requests were posted and will complete
 * (successfully or flushed); the others were not posted and will never complete.
 */
public class PartialPostException extends FabricException {

    private final int posted;

    public PartialPostException(String message, Throwable cause, int posted) {
        super(message, cause);
        this.posted = posted;
    }

    public int posted() {
        return posted;
    }
}
