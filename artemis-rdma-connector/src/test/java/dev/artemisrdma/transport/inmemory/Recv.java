/*
 * One receive taken from a receive queue to take a SEND: reused by its taker, so that taking one allocates nothing.
 * Owned by the thread that executes the SEND.
 */
package dev.artemisrdma.transport.inmemory;

public final class Recv {
    public long wrId;
    public long address;
    public int length;
    public int lkey;
}
