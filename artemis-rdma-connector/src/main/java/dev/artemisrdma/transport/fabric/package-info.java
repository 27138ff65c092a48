/**
 * The RDMA operations the transport needs, as a service provider interface: {@link
 * dev.artemisrdma.transport.fabric.Fabric} and the objects it hands out (devices, registered memory, completion
 * queues, shared receive queues, queue pairs, listeners and connection requests), the work request lists posted to
 * them, and the errors they raise. It depends on nothing else in the project: the transport above uses it, and each
 * fabric implements it (the verbs binding in {@code dev.artemisrdma.transport.verbs}, the in-memory fake in the
 * tests), so neither knows the other.
 *
 * <p>The ownership rules every implementation keeps are stated on the interfaces: a fabric's objects form a tree
 * (device, then registered memory, completion queues and shared receive queues, then queue pairs), a parent is never
 * destroyed before its children, and a queue pair handed to {@link dev.artemisrdma.transport.fabric.ConnectionSetup#prepare}
 * belongs to the caller from then on.
 */
package dev.artemisrdma.transport.fabric;
