/*
 * Fakes a posted receive work request (ibv_recv_wr with one scatter-gather entry) on a queue pair or a shared receive
 * queue. Enforces nothing itself; immutable, held in a receive queue under the fabric's lock.
 */
package dev.artemisrdma.transport;

record RecvWr(long wrId, long address, int length, int lkey) {
}
