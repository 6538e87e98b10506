/* Philox4x32-10 and the draws built on it (<ganflow/rng.h>): Random123's
 * known-answer vectors, the counter arithmetic of draws, moments of the
 * uniform and normal transforms, and identical numbers whatever the thread
 * count (host draws, the CPU backend's fills, dropout masks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "test_nn_util.h"

static void test_kat(void **state)
{
	(void)state;
	/* tests/kat_vectors of github.com/DEShawResearch/random123 */
	static const uint32_t v[3][10] = {
		{ 0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 },
		{ 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
		  0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd },
		{ 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
		  0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 },
	};
	for (int i = 0; i < 3; i++) {
		uint32_t out[4];
		gf_philox4x32(out, v[i], v[i] + 4);
		for (int j = 0; j < 4; j++)
			assert_int_equal(out[j], v[i][6 + j]);
	}
	/* gf_rng_block packs (block, stream) into the counter, seed into the key */
	uint32_t a[4], b[4];
	uint32_t ctr[4] = { 5, 0, 7, 0 }, key[2] = { 9, 0 };
	gf_rng_block(a, 9, 7, 5);
	gf_philox4x32(b, ctr, key);
	assert_memory_equal(a, b, sizeof(a));
}

static void test_offsets(void **state)
{
	(void)state;
	gf_rng r;
	gf_rng_init(&r, 42, 3);
	assert_int_equal(r.offset, 0);
	float x[10], y[12];
	gf_rng_uniform(&r, x, 10, 0, 1);
	assert_int_equal(r.offset, 3);   /* ceil(10 / 4) blocks */
	assert_int_equal(gf_rng_blocks(0), 0);
	assert_int_equal(gf_rng_blocks(4), 1);
	assert_int_equal(gf_rng_blocks(5), 2);
	/* a draw depends on (seed, stream, offset) only */
	gf_rng s = { 42, 3, 0 };
	gf_rng_uniform(&s, y, 12, 0, 1);
	assert_memory_equal(x, y, sizeof(x));
	/* another stream or seed gives other numbers */
	gf_rng t = { 42, 4, 0 }, u = { 43, 3, 0 };
	gf_rng_uniform(&t, y, 10, 0, 1);
	assert_memory_not_equal(x, y, sizeof(x));
	gf_rng_uniform(&u, y, 10, 0, 1);
	assert_memory_not_equal(x, y, sizeof(x));
	/* element i of a normal draw without state */
	float z[9];
	gf_rng w = { 7, 1, 100 };
	gf_rng_normal(&w, z, 9, 0.0f, 1.0f);
	for (size_t i = 0; i < 9; i++)
		assert_true(z[i] == gf_rng_normal_at(7, 1, 100, i));
	/* u64 draws consume one block each */
	gf_rng q = { 1, 1, 0 };
	uint64_t a = gf_rng_u64(&q), b = gf_rng_u64(&q);
	assert_int_equal(q.offset, 2);
	assert_true(a != b);
}

static void test_moments(void **state)
{
	(void)state;
	enum { N = 1 << 18 };
	float *x = malloc(N * sizeof(float));
	gf_rng r = { 2024, 0, 0 };
	gf_rng_uniform(&r, x, N, -1.0f, 3.0f);
	double s = 0, s2 = 0, lo = 1e9, hi = -1e9;
	for (int i = 0; i < N; i++) {
		s += x[i];
		s2 += (double)x[i] * x[i];
		lo = x[i] < lo ? x[i] : lo;
		hi = x[i] > hi ? x[i] : hi;
	}
	double mean = s / N, var = s2 / N - mean * mean;
	assert_true(fabs(mean - 1.0) < 0.01);
	assert_true(fabs(var - 16.0 / 12.0) < 0.01);
	assert_true(lo >= -1.0 && hi < 3.0);
	gf_rng_normal(&r, x, N, 0.5f, 2.0f);
	s = s2 = 0;
	double s4 = 0;
	for (int i = 0; i < N; i++) {
		double d = x[i] - 0.5;
		s += d;
		s2 += d * d;
		s4 += d * d * d * d;
	}
	mean = s / N;
	var = s2 / N;
	assert_true(fabs(mean) < 0.02);
	assert_true(fabs(var - 4.0) < 0.04);
	assert_true(fabs(s4 / N / (var * var) - 3.0) < 0.05);   /* normal kurtosis */
	free(x);
}

/* The CPU backend splits fills and dropout over its threads; the numbers
 * must be those of the host draw for any thread count. */
static void test_threads(void **state)
{
	(void)state;
	enum { N = 100003 };
	float *host = malloc(N * sizeof(float)), *dev = malloc(N * sizeof(float));
	float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
	float *m1 = malloc(N * sizeof(float)), *m2 = malloc(N * sizeof(float)), *y1 = malloc(N * sizeof(float));
	gf_rng r = { 11, 5, 17 };
	gf_rng h = r;
	gf_rng_normal(&h, host, N, 0.0f, 1.0f);
	for (int i = 0; i < N; i++)
		x[i] = 1.0f + (float)i;
	for (int threads = 1; threads <= 4; threads++) {
		gf_backend *be;
		gf_backend_opts o = { .threads = threads };
		NN_OK(gf_backend_open("cpu", &o, &be));
		assert_int_equal(be->threads, threads);
		NN_OK(be->ops->rng_normal(be, dev, N, 0.0f, 1.0f, &r));
		assert_memory_equal(host, dev, N * sizeof(float));
		NN_OK(be->ops->rng_uniform(be, dev, N, -2.0f, 2.0f, &r));
		gf_rng hu = r;
		gf_rng_uniform(&hu, y, N, -2.0f, 2.0f);
		assert_memory_equal(y, dev, N * sizeof(float));
		/* dropout: element-wise and grouped masks */
		NN_OK(be->ops->dropout_forward(be, y, threads == 1 ? m1 : m2, x, N, 1, 0.3f, &r));
		if (threads == 1) {
			memcpy(y1, y, N * sizeof(float));
		} else {
			assert_memory_equal(m1, m2, N * sizeof(float));
			assert_memory_equal(y1, y, N * sizeof(float));
		}
		gf_backend_close(be);
	}
	/* the kept fraction and the scale */
	int kept = 0;
	for (int i = 0; i < N; i++) {
		assert_true(m1[i] == 0.0f || m1[i] == 1.0f / 0.7f);
		kept += m1[i] != 0.0f;
		assert_true(y1[i] == x[i] * m1[i]);
	}
	assert_true(fabs(kept / (double)N - 0.7) < 0.01);
	free(host);
	free(dev);
	free(x);
	free(y);
	free(m1);
	free(m2);
	free(y1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kat),
		cmocka_unit_test(test_offsets),
		cmocka_unit_test(test_moments),
		cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
