/* Helpers shared by the CUDA backend's tests (test_cuda_*.c): the skip
 * rule and backends of each precision and layout, on top of
 * test_cuda_cmp.h (copies, random inputs, tolerances, soft checks), which
 * needs no CUDA header so that a CPU test checks the comparisons.
 * Header-only.
 *
 * Skip rule: a machine without a usable CUDA device (cudaGetDeviceCount
 * fails or finds none: no GPU, no driver) prints
 *   "no CUDA device: <cudaGetErrorString>"
 * and the test exits 77, which CTest reports as skipped. With a device,
 * every failure to open the backend is a failure, not a skip. */
#ifndef GF_TEST_CUDA_UTIL_H
#define GF_TEST_CUDA_UTIL_H

#include <cuda_runtime_api.h>

#include "test_cuda_cmp.h"

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

#endif
