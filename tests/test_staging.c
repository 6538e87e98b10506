/* Real batches staged for a step's device buffers (gf_staging,
 * <ganflow/train.h>), on the plain CPU backend (no copy instance: the copy
 * at use) and on the CPU backend as a checked device
 * (GANFLOW_CPU_DEVICE_CHECK=1, which refuses an asynchronous copy out of
 * pageable memory and a host copy into device memory) with a copy
 * instance:
 *  - the slots alternate 0, 1, 0; each slot's message stays readable until
 *    the slot is put again, and is released then (its pool gets it back),
 *    the rest at gf_staging_release;
 *  - use puts the slot's images (and, with labels, its labels) into the
 *    step's buffers, a short batch too;
 *  - a staging without labels leaves the label buffer alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <ganflow/err.h>
#include <ganflow/msg.h>
#include <ganflow/nn.h>
#include <ganflow/train.h>

enum { C = 2, H = 3, W = 3, MAXB = 4 };
#define SAMPLE ((size_t)C * H * W)

/* A batch of n images whose pixels encode (batch k, index), labels 10 k + i. */
static gf_msg *batch(gf_msg_pool *pool, int k, int n)
{
	gf_msg *m = gf_msg_pool_get(pool);
	assert_non_null(m);
	int64_t xs[4] = { n, C, H, W }, ls[1] = { n };
	float *x = gf_msg_tensor(m, 0, GF_F32, 4, xs);
	int32_t *l = gf_msg_tensor(m, 1, GF_I32, 1, ls);
	assert_non_null(x);
	assert_non_null(l);
	for (size_t i = 0; i < (size_t)n * SAMPLE; i++)
		x[i] = (float)(1000 * k + (int)i);
	for (int i = 0; i < n; i++)
		l[i] = 10 * k + i;
	return m;
}

/* The step's buffers hold batch k of n images (labels too when asked). */
static void holds(gf_backend *be, const float *x, const int32_t *l, int k, int n, int labels)
{
	assert_int_equal(be->ops->sync(be), 0);
	for (size_t i = 0; i < (size_t)n * SAMPLE; i++)
		if (x[i] != (float)(1000 * k + (int)i))
			fail_msg("image value %zu: %g, want batch %d's %d", i, (double)x[i], k, 1000 * k + (int)i);
	for (int i = 0; labels && i < n; i++)
		assert_int_equal(l[i], 10 * k + i);
}

static void run(gf_backend *be, gf_backend *cbe, int labels)
{
	gf_allocator pinned, *alloc = NULL;
	if (!gf_train_pinned_allocator(be, &pinned))
		alloc = &pinned;
	gf_msg_pool *pool;
	assert_int_equal(gf_msg_pool_create(4, alloc, &pool), 0);
	float *x;
	int32_t *l;
	assert_int_equal(be->ops->alloc(be, (void **)&x, MAXB * SAMPLE * sizeof(float)), 0);
	assert_int_equal(be->ops->alloc(be, (void **)&l, MAXB * sizeof(int32_t)), 0);
	assert_int_equal(be->ops->fill(be, (float *)(void *)l, MAXB, 0.0f), 0);
	gf_staging *g;
	assert_int_equal(gf_staging_create(&g, be, cbe, SAMPLE * sizeof(float), labels, MAXB), 0);
	assert_int_equal(gf_staging_copy_stream(g), cbe != NULL);

	gf_msg *m0 = batch(pool, 0, MAXB), *m1 = batch(pool, 1, MAXB), *m2 = batch(pool, 2, 3);
	int s0, s1, s2;
	assert_int_equal(gf_staging_put(g, m0, &s0), 0);
	assert_int_equal(gf_staging_put(g, m1, &s1), 0);   /* staged ahead, as d_step does */
	assert_int_equal(s0, 0);
	assert_int_equal(s1, 1);
	assert_ptr_equal(gf_staging_msg(g, s0), m0);
	assert_ptr_equal(gf_staging_msg(g, s1), m1);
	assert_int_equal(gf_msg_pool_free_count(pool), 1);
	assert_int_equal(gf_staging_use(g, s0, x, l), 0);
	holds(be, x, l, 0, MAXB, labels);
	assert_int_equal(gf_staging_use(g, s1, x, l), 0);
	holds(be, x, l, 1, MAXB, labels);

	/* slot 0 again: m0 goes back to its pool, m1 stays */
	assert_int_equal(gf_staging_put(g, m2, &s2), 0);
	assert_int_equal(s2, 0);
	assert_ptr_equal(gf_staging_msg(g, s2), m2);
	assert_ptr_equal(gf_staging_msg(g, s1), m1);
	assert_int_equal(gf_msg_pool_free_count(pool), 2);
	assert_int_equal(gf_staging_use(g, s2, x, l), 0);   /* a short batch: the rest stays */
	holds(be, x, l, 2, 3, labels);
	assert_true(x[3 * SAMPLE] == (float)(1000 + 3 * (int)SAMPLE));
	if (!labels)
		for (int i = 0; i < MAXB; i++)
			assert_int_equal(l[i], 0);

	gf_staging_release(g);
	assert_int_equal(gf_msg_pool_free_count(pool), 4);
	gf_staging_destroy(g);
	be->ops->free(be, x);
	be->ops->free(be, l);
	gf_msg_pool_destroy(pool);
}

static void test_host(void **state)
{
	(void)state;
	for (int labels = 0; labels < 2; labels++) {
		gf_backend *be;
		assert_int_equal(gf_backend_open("cpu", NULL, &be), 0);
		run(be, NULL, labels);
		gf_backend_close(be);
	}
}

static void test_copy_stream(void **state)
{
	(void)state;
	setenv("GANFLOW_CPU_DEVICE_CHECK", "1", 1);
	for (int labels = 0; labels < 2; labels++) {
		gf_backend *be, *cbe;
		assert_int_equal(gf_backend_open("cpu", NULL, &be), 0);
		assert_int_equal(gf_backend_open("cpu", NULL, &cbe), 0);
		assert_true(gf_train_async(be));
		run(be, cbe, labels);   /* the staging closes cbe */
		gf_backend_close(be);
	}
	unsetenv("GANFLOW_CPU_DEVICE_CHECK");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host),
		cmocka_unit_test(test_copy_stream),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
