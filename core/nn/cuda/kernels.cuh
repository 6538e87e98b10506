/* Device helpers shared by the CUDA backend's kernel files (ops.cu, bn.cu,
 * conv.cu): launch geometry, fixed-order block reductions, fast integer
 * division, element type conversions, the per-step scalar lookup.
 *
 * Determinism: every reduction here runs in an order fixed by the problem
 * size alone (never by timing, never through atomics), so the same call
 * gives the same bits every time, inside or outside a CUDA graph. */
#ifndef GF_NN_CUDA_KERNELS_CUH
#define GF_NN_CUDA_KERNELS_CUH

#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define GF_RNG_HD __host__ __device__
#include <ganflow/rng.h>

#include "cuda.h"

#define GF_CU_THREADS 256
#define GF_CU_CHUNK 8192u        /* values per block in per-channel reductions (gf_cu_chunks) */
#define GF_CU_MAX_BLOCKS 8192u   /* grid-stride loops beyond this */

/* Blocks for n elements at `per` elements per thread, capped. */
static inline unsigned gf_cu_grid(size_t n, unsigned per = 1)
{
	size_t b = (n + (size_t)GF_CU_THREADS * per - 1) / ((size_t)GF_CU_THREADS * per);
	if (b < 1)
		b = 1;
	return b > GF_CU_MAX_BLOCKS ? GF_CU_MAX_BLOCKS : (unsigned)b;
}

/* Per-step scalar: from the graph slot when there is one, else by value. */
#define GF_CU_DYN(dyn, field, byval) ((dyn) ? (dyn)->field : (byval))

/* Sum of v over the block (blockDim.x a multiple of 32, at most 1024) in a
 * fixed order; the result is valid in thread 0. Safe to call repeatedly. */
static __device__ __forceinline__ double gf_cu_block_sum(double v)
{
	__shared__ double sh[32];
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, o);
	int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
	__syncthreads();   /* a previous call may still read sh */
	if (lane == 0)
		sh[wid] = v;
	__syncthreads();
	if (wid == 0) {
		int nw = (int)(blockDim.x >> 5);
		v = lane < nw ? sh[lane] : 0.0;
		for (int o = 16; o > 0; o >>= 1)
			v += __shfl_down_sync(0xffffffffu, v, o);
	}
	return v;
}

/* n / d and n % d for a fixed d > 0 and n < 2^31 (PyTorch's IntDivider). */
struct gf_cu_div {
	uint32_t d, m, s;
};

static inline gf_cu_div gf_cu_div_make(uint32_t d)
{
	gf_cu_div r;
	r.d = d;
	uint32_t s = 0;
	while (s < 32 && ((uint64_t)1 << s) < d)
		s++;
	r.s = s;
	r.m = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << s) - d)) / d + 1);
	return r;
}

static __device__ __forceinline__ uint32_t gf_cu_divq(gf_cu_div v, uint32_t n)
{
	return (uint32_t)(((uint64_t)__umulhi(n, v.m) + n) >> v.s);
}

/* ---- element types ---- */

template <typename T> struct gf_cu_type;
template <> struct gf_cu_type<float> {
	static __device__ __forceinline__ float to(float v) { return v; }
	static __device__ __forceinline__ float from(float v) { return v; }
};
template <> struct gf_cu_type<__nv_bfloat16> {
	static __device__ __forceinline__ float to(__nv_bfloat16 v) { return __bfloat162float(v); }
	static __device__ __forceinline__ __nv_bfloat16 from(float v) { return __float2bfloat16_rn(v); }
};
template <> struct gf_cu_type<__half> {
	static __device__ __forceinline__ float to(__half v) { return __half2float(v); }
	static __device__ __forceinline__ __half from(float v) { return __float2half_rn(v); }
};

/* Records an input error for element i: the smallest element wins, so the
 * report does not depend on thread order. */
static __device__ __forceinline__ void gf_cu_record_err(gf_cu_status *st, unsigned long long i, unsigned code)
{
	if (st)
		atomicMin(&st->err, (i << 8) | code);
}

#endif
