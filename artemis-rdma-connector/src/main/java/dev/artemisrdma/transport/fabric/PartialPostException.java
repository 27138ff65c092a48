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

    /**
     * How many of the {@code attempted} work requests a post that threw {@code e} did post: ibv_post_* stops at the
     * first bad request, so those before it were posted and will complete; any other failure posted none.
     */
    public static int postedOf(FabricException e, int attempted) {
        return e instanceof PartialPostException p ? Math.max(0, Math.min(p.posted(), attempted)) : 0;
    }
}
