/*
 * The data-path verbs of libibverbs are static inline functions that jump through the provider's
 * struct ibv_context_ops; they have no exported symbol. This shim gives each one a symbol so that Java can
 * call it through JNA direct mapping (about as fast as JNI) instead of JNA's reflective Function.invoke.
 *
 * Every function takes raw addresses: the Java side validates them (non-null, owned, still open) before the call.
 * Nothing here allocates, blocks, or keeps state.
 */
#include <stdint.h>
#include "abi_table.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT int ardma_post_send(intptr_t qp, intptr_t wr, intptr_t bad_wr)
{
	return ibv_post_send((struct ibv_qp *)qp, (struct ibv_send_wr *)wr, (struct ibv_send_wr **)bad_wr);
}

EXPORT int ardma_post_recv(intptr_t qp, intptr_t wr, intptr_t bad_wr)
{
	return ibv_post_recv((struct ibv_qp *)qp, (struct ibv_recv_wr *)wr, (struct ibv_recv_wr **)bad_wr);
}

EXPORT int ardma_poll_cq(intptr_t cq, int num_entries, intptr_t wc)
{
	return ibv_poll_cq((struct ibv_cq *)cq, num_entries, (struct ibv_wc *)wc);
}

/*
 * Busy-polls in native code for up to `spins` attempts and returns at the first completion (or 0). A Java loop
 * polling the CQ pays a JNI transition per empty poll; this pays one per completion, and sees a completion within
 * one native poll of its arrival instead of one JNI round trip.
 */
EXPORT int ardma_poll_cq_spin(intptr_t cq, int num_entries, intptr_t wc, int spins)
{
	int n;

	do {
		n = ibv_poll_cq((struct ibv_cq *)cq, num_entries, (struct ibv_wc *)wc);
	} while (n == 0 && --spins > 0);
	return n;
}

EXPORT int ardma_req_notify_cq(intptr_t cq, int solicited_only)
{
	return ibv_req_notify_cq((struct ibv_cq *)cq, solicited_only);
}

/* The layout table this shim was compiled with, for the start-up ABI check. */
#define ABI_NAME(name, value) #name,
#define ABI_VALUE(name, value) (long)(value),
static const char *const abi_names[] = { ABI_TABLE(ABI_NAME) };
static const long abi_values[] = { ABI_TABLE(ABI_VALUE) };

EXPORT int ardma_abi_count(void)
{
	return (int)(sizeof(abi_values) / sizeof(abi_values[0]));
}

EXPORT const char *ardma_abi_name(int index)
{
	return (index >= 0 && index < ardma_abi_count()) ? abi_names[index] : (const char *)0;
}

EXPORT long ardma_abi_value(int index)
{
	return (index >= 0 && index < ardma_abi_count()) ? abi_values[index] : -1L;
}
