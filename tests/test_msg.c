/* Tests of message envelopes and pools (<ganflow/msg.h>): reset state,
 * reference counts, LIFO reuse, buffers that only grow, tensors, scalars,
 * custom allocators, and a pool whose envelopes are released from several
 * threads while its owner keeps taking them (run under TSan too). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <ganflow/msg.h>
#include <ganflow/ring.h>

static void test_pool_basics(void **state)
{
	(void)state;
	gf_msg_pool *pool;
	assert_int_equal(gf_msg_pool_create(0, NULL, &pool), -EINVAL);
	assert_int_equal(gf_msg_pool_create(3, NULL, &pool), 0);
	assert_int_equal(gf_msg_pool_size(pool), 3);
	assert_int_equal(gf_msg_pool_free_count(pool), 3);
	gf_msg *a = gf_msg_pool_get(pool), *b = gf_msg_pool_get(pool), *c = gf_msg_pool_get(pool);
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(c);
	assert_true(a != b && b != c && a != c);
	assert_null(gf_msg_pool_get(pool));
	assert_int_equal(gf_msg_pool_free_count(pool), 0);
	/* a fresh envelope is reset */
	assert_int_equal(a->step, -1);
	assert_int_equal(a->seq, -1);
	assert_int_equal(a->label, -1);
	assert_int_equal(a->key, 0);
	assert_int_equal(a->ntensors, 0);
	assert_int_equal(a->nscalars, 0);
	assert_null(a->event);
	/* refcounts: two references, the second release returns it */
	a->step = 42;
	gf_msg_retain(a);
	gf_msg_release(a);
	assert_int_equal(gf_msg_pool_free_count(pool), 0);
	gf_msg_release(a);
	assert_int_equal(gf_msg_pool_free_count(pool), 1);
	/* LIFO: the envelope just released comes back first, reset */
	gf_msg *again = gf_msg_pool_get(pool);
	assert_ptr_equal(again, a);
	assert_int_equal(again->step, -1);
	gf_msg_release(again);
	gf_msg_release(b);
	gf_msg_release(c);
	gf_msg_release(NULL);
	assert_int_equal(gf_msg_pool_free_count(pool), 3);
	gf_msg_pool_destroy(pool);
}

static void test_buffers_and_tensors(void **state)
{
	(void)state;
	gf_msg_pool *pool;
	assert_int_equal(gf_msg_pool_create(1, NULL, &pool), 0);
	gf_msg *m = gf_msg_pool_get(pool);
	void *p = gf_msg_buffer(m, 2, 100);
	assert_non_null(p);
	assert_int_equal((uintptr_t)p % 64, 0);
	assert_ptr_equal(gf_msg_buffer(m, 2, 50), p); /* smaller: same buffer */
	assert_ptr_equal(gf_msg_buffer(m, 2, 100), p);
	assert_null(gf_msg_buffer(m, GF_MSG_MAX_TENSORS, 8));
	assert_null(gf_msg_buffer(m, -1, 8));
	int64_t shape[3] = { 2, 3, 4 };
	float *x = gf_msg_tensor(m, 1, GF_F32, 3, shape);
	assert_non_null(x);
	assert_int_equal(m->ntensors, 2);
	assert_int_equal(m->t[1].ndim, 3);
	assert_int_equal(m->t[1].shape[2], 4);
	assert_int_equal(gf_tensor_bytes(&m->t[1]), 96);
	assert_ptr_equal(m->t[1].data, x);
	for (int i = 0; i < 24; i++)
		x[i] = (float)i;
	int64_t big[1] = { 1 << 20 };
	assert_null(gf_msg_tensor(m, 0, GF_F32, GF_MAX_DIMS + 1, big));
	float *y = gf_msg_tensor(m, 0, GF_F32, 1, big);
	assert_non_null(y);
	y[(1 << 20) - 1] = 1.0f;
	assert_int_equal(m->ntensors, 2);
	/* buffers survive release and reuse: the next get finds them */
	gf_msg_release(m);
	m = gf_msg_pool_get(pool);
	assert_int_equal(m->ntensors, 0);
	assert_ptr_equal(gf_msg_buffer(m, 1, 96), x);
	assert_true(x[23] == 23.0f);
	gf_msg_release(m);
	gf_msg_pool_destroy(pool);
}

static void test_scalars(void **state)
{
	(void)state;
	gf_msg_pool *pool;
	assert_int_equal(gf_msg_pool_create(1, NULL, &pool), 0);
	gf_msg *m = gf_msg_pool_get(pool);
	assert_true(gf_msg_scalar(m, "loss", -7.0) == -7.0);
	assert_int_equal(gf_msg_set_scalar(m, "loss", 0.5), 0);
	assert_int_equal(gf_msg_set_scalar(m, "loss", 0.25), 0);
	assert_int_equal(m->nscalars, 1);
	assert_true(gf_msg_scalar(m, "loss", 0) == 0.25);
	/* a long name is truncated, consistently for set and get */
	assert_int_equal(gf_msg_set_scalar(m, "a_very_long_scalar_name_indeed", 3.0), 0);
	assert_true(gf_msg_scalar(m, "a_very_long_scalar_name_indeed", 0) == 3.0);
	char name[16];
	for (int i = m->nscalars; i < GF_MSG_MAX_SCALARS; i++) {
		snprintf(name, sizeof(name), "s%d", i);
		assert_int_equal(gf_msg_set_scalar(m, name, i), 0);
	}
	assert_int_equal(gf_msg_set_scalar(m, "one_too_many", 1), -ENOSPC);
	assert_true(gf_msg_scalar(m, "s10", 0) == 10.0);
	gf_msg_release(m);
	gf_msg_pool_destroy(pool);
}

struct counting_alloc {
	int allocs, frees;
};

static void *calloc_fn(void *ud, size_t n)
{
	((struct counting_alloc *)ud)->allocs++;
	return malloc(n);
}

static void cfree_fn(void *ud, void *p)
{
	((struct counting_alloc *)ud)->frees++;
	free(p);
}

static void test_allocator(void **state)
{
	(void)state;
	struct counting_alloc ca = { 0, 0 };
	gf_allocator a = { calloc_fn, cfree_fn, &ca };
	gf_msg_pool *pool;
	assert_int_equal(gf_msg_pool_create(2, &a, &pool), 0);
	gf_msg *m = gf_msg_pool_get(pool);
	assert_non_null(gf_msg_buffer(m, 0, 10));
	assert_non_null(gf_msg_buffer(m, 0, 1000)); /* grows: frees the old one */
	assert_non_null(gf_msg_buffer(m, 1, 10));
	assert_int_equal(ca.allocs, 3);
	assert_int_equal(ca.frees, 1);
	gf_msg_release(m);
	gf_msg_pool_destroy(pool);
	assert_int_equal(ca.frees, 3);
}

/* ---- concurrent release ---- */

#define RELEASERS 3
#define ROUNDS 200000

struct shared {
	gf_ring *rings[RELEASERS];
	int callbacks_seen;
};

static void *releaser(void *arg)
{
	gf_ring *r = arg;
	for (;;) {
		void *p;
		int rc = gf_ring_pop(r, &p);
		if (rc)
			break;
		gf_msg *m = p;
		/* every holder reads the payload before letting go */
		if (m->step != (int64_t)m->key * 3)
			abort();
		gf_msg_release(m);
	}
	return NULL;
}

static void count_release(void *ud)
{
	__atomic_add_fetch((int *)ud, 1, __ATOMIC_RELAXED);
}

static void test_concurrent_release(void **state)
{
	(void)state;
	gf_msg_pool *pool;
	assert_int_equal(gf_msg_pool_create(16, NULL, &pool), 0);
	int released = 0;
	gf_msg_pool_on_release(pool, count_release, &released);
	struct shared sh;
	pthread_t t[RELEASERS];
	for (int i = 0; i < RELEASERS; i++) {
		assert_int_equal(gf_ring_create(8, 8, &sh.rings[i]), 0);
		assert_int_equal(pthread_create(&t[i], NULL, releaser, sh.rings[i]), 0);
	}
	int rounds = ROUNDS;
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
	rounds /= 4;
#endif
	for (int i = 0; i < rounds; i++) {
		gf_msg *m;
		while (!(m = gf_msg_pool_get(pool)))
			; /* the releasers give envelopes back concurrently */
		m->key = (uint64_t)i;
		m->step = (int64_t)i * 3;
		/* fan out to every releaser: one reference each */
		for (int k = 1; k < RELEASERS; k++)
			gf_msg_retain(m);
		for (int k = 0; k < RELEASERS; k++)
			assert_int_equal(gf_ring_push(sh.rings[k], m), 0);
	}
	for (int i = 0; i < RELEASERS; i++)
		gf_ring_close(sh.rings[i]);
	for (int i = 0; i < RELEASERS; i++) {
		pthread_join(t[i], NULL);
		gf_ring_destroy(sh.rings[i]);
	}
	assert_int_equal(gf_msg_pool_free_count(pool), 16);
	assert_int_equal(__atomic_load_n(&released, __ATOMIC_RELAXED), rounds);
	gf_msg_pool_destroy(pool);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_basics),
		cmocka_unit_test(test_buffers_and_tensors),
		cmocka_unit_test(test_scalars),
		cmocka_unit_test(test_allocator),
		cmocka_unit_test(test_concurrent_release),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
