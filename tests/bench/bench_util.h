/* What the nn benchmarks (bench_dcgan_step, bench_layers,
 * bench_backbone_step, bench_attention, bench_inception) share: the
 * clock, key=value arguments, and the SGEMM ceilings they print their
 * achieved GFLOP/s against. Header-only; link OpenBLAS (cblas). */
#ifndef GF_BENCH_UTIL_H
#define GF_BENCH_UTIL_H

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include <ganflow/nn.h>

/* Monotonic seconds. */
static inline double bench_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* 1 and *v = the value when a is "key=value". */
static inline int bench_arg(const char *a, const char *key, const char **v)
{
	size_t n = strlen(key);
	if (strncmp(a, key, n) || a[n] != '=')
		return 0;
	*v = a + n + 1;
	return 1;
}

/* OpenBLAS's own SGEMM (m, n, k) GFLOP/s with `threads` threads, repeated
 * for 0.5 s: the ceiling. Changes OpenBLAS's process-wide thread count:
 * call it after the engine's work (the CPU backend runs OpenBLAS on one
 * thread and splits GEMMs itself). */
static inline double bench_openblas_gflops(int threads, int m, int n, int k)
{
	float *a = malloc(sizeof(float) * (size_t)m * k), *b = malloc(sizeof(float) * (size_t)k * n);
	float *c = malloc(sizeof(float) * (size_t)m * n);
	if (!a || !b || !c) {
		free(a), free(b), free(c);
		return 0;
	}
	gf_rng r;
	gf_rng_init(&r, 7, 1);
	gf_rng_uniform(&r, a, (size_t)m * k, -1, 1);
	gf_rng_uniform(&r, b, (size_t)k * n, -1, 1);
	openblas_set_num_threads(threads);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
	int it = 0;
	double t0 = bench_now(), t;
	do {
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
		it++;
		t = bench_now() - t0;
	} while (t < 0.5);
	free(a), free(b), free(c);
	return 2.0 * m * n * k * it / t * 1e-9;
}

#endif
