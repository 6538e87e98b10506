/* StyleGAN2-ADA augmentation kernels (launchers called from ada_cuda.c):
 * the CPU's formulas (core/nn/cpu/ada_cpu.c) with the same transforms and
 * taps (../ada_params.h; built with -fmad=false, so the sample points round
 * as the CPU's). The forward reads its four taps per output pixel; the
 * backward gathers, one thread per input pixel: the output pixels whose
 * taps reach it are those whose sample point lies within one pixel of one
 * of its reflected copies (x + 2k(w - 1), and -x + 2k(w - 1) for interior
 * x), found through the inverse of the affine map and visited in a fixed
 * order, so there are no atomics and the sums do not vary run to run. */
#include "kernels.cuh"
#include "ada.h"
#include "../ada_params.h"

#define ADA_THREADS 256

static __global__ void ada_params_kernel(float *m, const float *u, const float *p, int n, int c, int h, int w,
                                         unsigned what)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	gf_ada_draw d;
	gf_ada_draw_of(&d, u + (size_t)i * GF_ADA_U, *p, h, w, what);
	gf_ada_matrix(m + (size_t)i * GF_ADA_M, &d, c, h, w);
}

static __global__ void ada_fwd_kernel(float *y, const float *x, const float *m, int n, int c, int h, int w, int affine)
{
	size_t hw = (size_t)h * w, e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (e >= (size_t)n * hw)
		return;
	size_t i = e / hw, q = e % hw;
	int r = (int)(q / w), col = (int)(q % w);
	const float *mi = m + i * GF_ADA_M, *cm = mi + ADA_M_COLOR, *xi = x + i * hw * c;
	float *yi = y + i * hw * c;
	int geom = mi[ADA_M_GEOM_ON] != 0.0f, color = mi[ADA_M_COLOR_ON] != 0.0f && (c == 1 || c == 3);
	int at[4] = { 0, 0, 0, 0 };
	float wt[4] = { 0, 0, 0, 0 }, v[3] = { 0, 0, 0 };
	if (geom)
		gf_ada_taps(mi, r, col, h, w, at, wt);
	for (int ch = 0; ch < c; ch++) {
		const float *xp = xi + ch * hw;
		float s = geom ? wt[0] * xp[at[0]] + wt[1] * xp[at[1]] + wt[2] * xp[at[2]] + wt[3] * xp[at[3]] : xp[q];
		if (!color)
			yi[ch * hw + q] = s;
		else if (ch < 3)
			v[ch] = s;
	}
	if (!color)
		return;
	if (c == 1) {
		yi[q] = cm[0] * v[0] + (affine ? cm[3] : 0.0f);
		return;
	}
	for (int k = 0; k < 3; k++)
		yi[k * hw + q] = cm[k * 4] * v[0] + cm[k * 4 + 1] * v[1] + cm[k * 4 + 2] * v[2] + (affine ? cm[k * 4 + 3] : 0.0f);
}

static __global__ void ada_bwd_kernel(float *dx, const float *dy, const float *m, int n, int c, int h, int w)
{
	size_t hw = (size_t)h * w, e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (e >= (size_t)n * hw)
		return;
	size_t i = e / hw, q = e % hw;
	int qy = (int)(q / w), qx = (int)(q % w);
	const float *mi = m + i * GF_ADA_M, *dyi = dy + i * hw * c;
	float *dxi = dx + i * hw * c;
	int geom = mi[ADA_M_GEOM_ON] != 0.0f, color = mi[ADA_M_COLOR_ON] != 0.0f && (c == 1 || c == 3);
	for (int ch = 0; ch < c; ch++)
		dxi[ch * hw + q] = geom ? gf_ada_gather(mi, dyi, color, c, h, w, ch, qy, qx)
		                        : gf_ada_colour_t(dyi, mi + ADA_M_COLOR, color, c, ch, hw, q);
}

extern "C" cudaError_t gf_cu_ada_params_launch(cudaStream_t s, float *m, const float *u, const float *p, int n, int c,
                                               int h, int w, unsigned what)
{
	ada_params_kernel<<<(n + 63) / 64, 64, 0, s>>>(m, u, p, n, c, h, w, what);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_ada_fwd_launch(cudaStream_t s, float *y, const float *x, const float *m, int n, int c,
                                            int h, int w, int affine)
{
	size_t total = (size_t)n * h * w;
	ada_fwd_kernel<<<(unsigned)((total + ADA_THREADS - 1) / ADA_THREADS), ADA_THREADS, 0, s>>>(y, x, m, n, c, h, w,
	                                                                                              affine);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_ada_bwd_launch(cudaStream_t s, float *dx, const float *dy, const float *m, int n, int c,
                                            int h, int w)
{
	size_t total = (size_t)n * h * w;
	ada_bwd_kernel<<<(unsigned)((total + ADA_THREADS - 1) / ADA_THREADS), ADA_THREADS, 0, s>>>(dx, dy, m, n, c, h, w);
	return cudaGetLastError();
}
