/*
 * The scatter-gather list of one SEND as the executing side reads it: straight from the caller's SendList
 * ({@link ListSges}, when the SEND executes inside the post) or from the copy kept at post time ({@link KeptSend}).
 */
package dev.artemisrdma.transport.inmemory;

public interface Sges {
    int sgeCount();

    long sgeAddress(int s);

    int sgeLength(int s);

    int sgeLkey(int s);

    /** The data copied at post time (an inline SEND); null: read from the entries when the SEND executes. */
    byte[] inlineData();
}
