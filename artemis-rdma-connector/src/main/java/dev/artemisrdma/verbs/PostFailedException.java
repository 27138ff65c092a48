package dev.artemisrdma.verbs;

/**
 * ibv_post_send / ibv_post_recv refused a list part-way. The first {@link #posted()} requests of the list were
 * posted and will complete (successfully or flushed); the rest were not and never will.
 */
public final class PostFailedException extends VerbsException {

    private final int posted;

    PostFailedException(String verb, int errno, String context, int posted) {
        super(verb, errno, context);
        this.posted = posted;
    }

    public int posted() {
        return posted;
    }
}
