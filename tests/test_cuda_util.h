/* Helpers shared by the CUDA backend's tests (test_cuda_*.c): the skip
 * rule, backends of each precision and layout, device <-> host copies,
 * random inputs, comparisons with stated tolerances. Header-only.
 *
 * Skip rule: a machine without a usable CUDA device (cudaGetDeviceCount
 * fails or finds none: no GPU, no driver) prints
 *   "no CUDA device: <cudaGetErrorString>"
 * and the test exits 77, which CTest reports as skipped. With a device,
 * every failure to open the backend is a failure, not a skip. */
#ifndef GF_TEST_CUDA_UTIL_H
#define GF_TEST_CUDA_UTIL_H

#include <cuda_runtime_api.h>

#include "test_nn_util.h"

/* Tolerances (relative error with a floor of 1e-2 of the tensor's largest
 * value, nn_relerr), GPU against the CPU backend:
 *   fp32                1e-4 (the bar; conv/GEMM sums in other orders)
 *   bf16 (8-bit mantissa operands, f32 accumulation)   3e-2
 *   fp16 (11-bit mantissa operands, f32 accumulation)  5e-3
 * Whole networks (several layers of rounding, batchnorm dividing by small
 * deviations) get 10x these. docs/cuda.md states the same numbers. */
#define TOL_FP32 1e-4
#define TOL_BF16 3e-2
#define TOL_FP16 5e-3

static inline void cuda_require_device(const char *test)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n < 1) {
		printf("%s: no CUDA device: %s\n", test, e != cudaSuccess ? cudaGetErrorString(e) : "none found");
		fflush(stdout);
		exit(77);
	}
}

static inline gf_backend *cuda_open(gf_precision prec, gf_layout_choice layout)
{
	gf_backend_opts o = { .threads = 2, .precision = prec, .layout = layout };
	gf_backend *be = NULL;
	int rc = gf_backend_open("cuda", &o, &be);
	if (rc) {
		fprintf(stderr, "cannot open the cuda backend: %s (%s)\n", gf_errmsg(), gf_strerror(rc));
		abort();
	}
	return be;
}

static inline gf_backend *cpu_open(void)
{
	gf_backend_opts o = { .threads = 2 };
	gf_backend *be = NULL;
	if (gf_backend_open("cpu", &o, &be))
		abort();
	return be;
}

static inline float *dev_alloc(gf_backend *be, size_t n)
{
	void *p = NULL;
	if (be->ops->alloc(be, &p, (n ? n : 1) * sizeof(float)))
		abort();
	return p;
}

static inline float *dev_from(gf_backend *be, const float *host, size_t n)
{
	float *d = dev_alloc(be, n);
	if (n && be->ops->copy(be, d, host, n * sizeof(float), GF_COPY_H2D))
		abort();
	return d;
}

/* A new host array with the device's contents. */
static inline float *host_from(gf_backend *be, const float *dev, size_t n)
{
	float *h = malloc((n ? n : 1) * sizeof(float));
	if (n && be->ops->copy(be, h, dev, n * sizeof(float), GF_COPY_D2H)) {
		fprintf(stderr, "D2H copy: %s\n", gf_errmsg());
		abort();
	}
	return h;
}

static inline float *host_rand(size_t n, uint64_t seed, float lo, float hi)
{
	float *h = malloc((n ? n : 1) * sizeof(float));
	gf_rng r;
	gf_rng_init(&r, seed, 77);
	gf_rng_uniform(&r, h, n, lo, hi);
	return h;
}

/* Compares a device tensor of the GPU backend with a host (CPU backend) one. */
static inline int dev_close(const char *what, gf_backend *gpu, const float *dev, const float *want, size_t n,
                            double tol)
{
	float *got = host_from(gpu, dev, n);
	int ok = nn_close(what, got, want, n, tol);
	free(got);
	return ok;
}

static inline int dev_equal(const char *what, gf_backend *gpu, const float *dev, const float *want, size_t n)
{
	float *got = host_from(gpu, dev, n);
	int ok = memcmp(got, want, n * sizeof(float)) == 0;
	if (!ok) {
		for (size_t i = 0; i < n; i++)
			if (memcmp(&got[i], &want[i], sizeof(float))) {
				fprintf(stderr, "%s: element %zu differs: got %.9g, want %.9g\n", what, i, (double)got[i],
				        (double)want[i]);
				break;
			}
	}
	free(got);
	return ok;
}

static inline const char *prec_name(gf_precision p)
{
	return p == GF_PREC_BF16 ? "bf16" : p == GF_PREC_FP16 ? "fp16" : "fp32";
}

static inline double prec_tol(gf_precision p)
{
	return p == GF_PREC_BF16 ? TOL_BF16 : p == GF_PREC_FP16 ? TOL_FP16 : TOL_FP32;
}

#endif
