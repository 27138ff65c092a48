/*
 * The data-path verbs of libibverbs are static inline functions that jump through the provider's
 * struct ibv_context_ops; they have no exported symbol. This shim gives each one a JNI entry point; the set-up
 * helpers (the ABI table, the registration of those entry points) are called through JNA.
 *
 * Every function takes raw addresses: the Java side validates them (non-null, owned, still open) before the call.
 * Nothing here allocates, blocks, or keeps state.
 */
#include <stdint.h>
#include <jni.h>
#include "abi_table.h"

#define EXPORT __attribute__((visibility("default")))

/*
 * JNI entry points of dev.artemisrdma.verbs.DataPath, bound by RegisterNatives (ardma_register_natives), so they
 * need no exported, name-mangled symbols. Plain JNI costs a JNI transition only: about 60 ns per call in the lab
 * guest against 1.7 us for a JNA direct-mapped call, whose generic dispatch converts every argument.
 */
static jint JNICALL post_send(JNIEnv *env, jclass cls, jlong qp, jlong wr, jlong bad_wr)
{
	(void)env;
	(void)cls;
	return ibv_post_send((struct ibv_qp *)(intptr_t)qp, (struct ibv_send_wr *)(intptr_t)wr,
			     (struct ibv_send_wr **)(intptr_t)bad_wr);
}

static jint JNICALL post_recv(JNIEnv *env, jclass cls, jlong qp, jlong wr, jlong bad_wr)
{
	(void)env;
	(void)cls;
	return ibv_post_recv((struct ibv_qp *)(intptr_t)qp, (struct ibv_recv_wr *)(intptr_t)wr,
			     (struct ibv_recv_wr **)(intptr_t)bad_wr);
}

static jint JNICALL poll_cq(JNIEnv *env, jclass cls, jlong cq, jint num_entries, jlong wc)
{
	(void)env;
	(void)cls;
	return ibv_poll_cq((struct ibv_cq *)(intptr_t)cq, num_entries, (struct ibv_wc *)(intptr_t)wc);
}

/*
 * Busy-polls in native code for up to `spins` attempts and returns at the first completion (or 0). A Java loop
 * polling the CQ pays a JNI transition per empty poll; this pays one per completion, and sees a completion within
 * one native poll of its arrival instead of one JNI round trip.
 */
static jint JNICALL poll_cq_spin(JNIEnv *env, jclass cls, jlong cq, jint num_entries, jlong wc, jint spins)
{
	int n;

	(void)env;
	(void)cls;
	do {
		n = ibv_poll_cq((struct ibv_cq *)(intptr_t)cq, num_entries, (struct ibv_wc *)(intptr_t)wc);
	} while (n == 0 && --spins > 0);
	return n;
}

static jint JNICALL req_notify_cq(JNIEnv *env, jclass cls, jlong cq, jint solicited_only)
{
	(void)env;
	(void)cls;
	return ibv_req_notify_cq((struct ibv_cq *)(intptr_t)cq, solicited_only);
}

/* ibv_post_srq_recv: receives for a shared receive queue (static inline, like the others). */
static jint JNICALL post_srq_recv(JNIEnv *env, jclass cls, jlong srq, jlong wr, jlong bad_wr)
{
	(void)env;
	(void)cls;
	return ibv_post_srq_recv((struct ibv_srq *)(intptr_t)srq, (struct ibv_recv_wr *)(intptr_t)wr,
				 (struct ibv_recv_wr **)(intptr_t)bad_wr);
}

EXPORT int ardma_abi_count(void);

static jint JNICALL abi_count(JNIEnv *env, jclass cls)
{
	(void)env;
	(void)cls;
	return ardma_abi_count();
}

static const JNINativeMethod data_path_methods[] = {
	{ "postSend", "(JJJ)I", (void *)post_send },
	{ "postRecv", "(JJJ)I", (void *)post_recv },
	{ "pollCq", "(JIJ)I", (void *)poll_cq },
	{ "pollCqSpin", "(JIJI)I", (void *)poll_cq_spin },
	{ "reqNotifyCq", "(JI)I", (void *)req_notify_cq },
	{ "abiCount", "()I", (void *)abi_count },
	{ "postSrqRecv", "(JJJ)I", (void *)post_srq_recv },
};

/*
 * Binds the natives above to `class_name`, resolved by the class loader of the Java method that calls this (JNA
 * passes the caller's JNIEnv). Returns 0, -1 when the class is not found, -2 when RegisterNatives fails (a
 * method missing or with another signature). Any pending Java exception is cleared: the caller reports.
 */
EXPORT int ardma_register_natives(JNIEnv *env, const char *class_name)
{
	jclass cls = (*env)->FindClass(env, class_name);
	int rc;

	if (cls == NULL) {
		(*env)->ExceptionClear(env);
		return -1;
	}
	rc = (*env)->RegisterNatives(env, cls, data_path_methods,
				     (jint)(sizeof(data_path_methods) / sizeof(data_path_methods[0])));
	if (rc != JNI_OK)
		(*env)->ExceptionClear(env);
	(*env)->DeleteLocalRef(env, cls);
	return rc == JNI_OK ? 0 : -2;
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
