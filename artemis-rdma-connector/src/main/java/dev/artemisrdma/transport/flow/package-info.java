/**
 * Flow control and the memory it meters: the receive credits of one direction
 * ({@link dev.artemisrdma.transport.flow.CreditWindow}), the registered send buffers of a device
 * ({@link dev.artemisrdma.transport.flow.BufferPool}, {@link dev.artemisrdma.transport.flow.PooledBuffer}), a
 * completion loop's shared receive pool ({@link dev.artemisrdma.transport.flow.SharedReceivePool}), and the heap that
 * fragmented frames are put back together in ({@link dev.artemisrdma.transport.flow.Reassembler} under the
 * transport-wide {@link dev.artemisrdma.transport.flow.ReassemblyBudget}).
 *
 * <p>Why together, and here: a credit is a posted receive slot, registered memory at the peer, so credits and memory
 * are one concern, each bounded and each giving back what it took. These classes keep their own counts (each says
 * under which lock) and know no channel or loop: the loop owns a shared pool and the channel draws on the rest, so
 * both sit above. The buffer pool implements {@code transport.api}'s {@code SendBuffer}, which is why that package
 * is below this one.
 */
package dev.artemisrdma.transport.flow;
