/* DiffAugment kernels (launchers called from augment_cuda.c): one block
 * per sample, the CPU's formulas (core/nn/cpu/augment_cpu.c) with the same
 * parameters (../augment_params.h); the sample's sums in double over the
 * block in a fixed order. */
#include "kernels.cuh"
#include "dbwd.h"
#include "../augment_params.h"

#define AUG_THREADS 256

/* A double summed over the block, in every thread. */
static __device__ double aug_total(double v)
{
	__shared__ double t;
	v = gf_cu_block_sum(v);
	if (threadIdx.x == 0)
		t = v;
	__syncthreads();
	return t;
}

/* linear: without the brightness shift (augment_linear, the double backward's Jacobian product) */
static __global__ void aug_fwd_kernel(float *y, const float *x, const float *u, int c, int h, int w, unsigned what,
                                      int linear)
{
	int i = blockIdx.x;
	size_t hw = (size_t)h * w, chw = hw * c;
	x += i * chw;
	y += i * chw;
	gf_aug_params p;
	gf_aug_params_of(&p, u + 7 * (size_t)i, h, w, what);
	if (linear)
		p.bright = 0.0f;
	double s = 0;
	for (size_t e = threadIdx.x; e < chw; e += blockDim.x)
		s += x[e];
	double mean = aug_total(s) / (double)chw + p.bright;
	for (size_t q = threadIdx.x; q < hw; q += blockDim.x) {
		int r = (int)(q / w), col = (int)(q % w), sr = r + p.tx, sc = col + p.ty;
		int live = sr >= 0 && sr < h && sc >= 0 && sc < w && !gf_aug_cut(&p, r, col);
		size_t src = live ? (size_t)sr * w + sc : 0;
		double m = 0;
		for (int ch = 0; live && ch < c; ch++)
			m += x[ch * hw + src];
		m = m / c + p.bright;
		for (int ch = 0; ch < c; ch++) {
			float v = 0;
			if (live) {
				double t = ((double)x[ch * hw + src] + p.bright - m) * p.sat + m;
				v = (float)((t - mean) * p.con + mean);
			}
			y[ch * hw + q] = v;
		}
	}
}

static __global__ void aug_bwd_kernel(float *dx, const float *dy, const float *u, int c, int h, int w, unsigned what)
{
	int i = blockIdx.x;
	size_t hw = (size_t)h * w, chw = hw * c;
	dy += i * chw;
	dx += i * chw;
	gf_aug_params p;
	gf_aug_params_of(&p, u + 7 * (size_t)i, h, w, what);
	double s = 0;
	for (size_t q = threadIdx.x; q < hw; q += blockDim.x) {
		int r = (int)(q / w), col = (int)(q % w), orow = r - p.tx, ocol = col - p.ty;
		int live = orow >= 0 && orow < h && ocol >= 0 && ocol < w && !gf_aug_cut(&p, orow, ocol);
		for (int ch = 0; ch < c; ch++) {
			float g = live ? dy[ch * hw + (size_t)orow * w + ocol] : 0.0f;
			dx[ch * hw + q] = g;
			s += g;
		}
	}
	double gm = aug_total(s) / (double)chw; /* aug_total syncs: every dx above is written */
	for (size_t q = threadIdx.x; q < hw; q += blockDim.x) {
		double m = 0;
		for (int ch = 0; ch < c; ch++)
			m += p.con * dx[ch * hw + q] + (1 - p.con) * gm;
		m /= c;
		for (int ch = 0; ch < c; ch++) {
			double d = p.con * dx[ch * hw + q] + (1 - p.con) * gm;
			dx[ch * hw + q] = (float)(p.sat * d + (1 - p.sat) * m);
		}
	}
}

extern "C" cudaError_t gf_cu_aug_fwd_launch(cudaStream_t s, float *y, const float *x, const float *u, int n, int c,
                                            int h, int w, unsigned what)
{
	aug_fwd_kernel<<<n, AUG_THREADS, 0, s>>>(y, x, u, c, h, w, what, 0);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_aug_lin_launch(cudaStream_t s, float *y, const float *x, const float *u, int n, int c,
                                            int h, int w, unsigned what)
{
	aug_fwd_kernel<<<n, AUG_THREADS, 0, s>>>(y, x, u, c, h, w, what, 1);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_aug_bwd_launch(cudaStream_t s, float *dx, const float *dy, const float *u, int n, int c,
                                            int h, int w, unsigned what)
{
	aug_bwd_kernel<<<n, AUG_THREADS, 0, s>>>(dx, dy, u, c, h, w, what);
	return cudaGetLastError();
}
