/* StyleGAN2 kernels of the CUDA backend (launchers called from
 * sg2_cuda.c): bias + activation with gain and clamping, its backward
 * from the output, 1 / sqrt(x + eps), FIR resampling (upfirdn2d) and its
 * adjoint as gathers, and style mixing's row pick. The CPU's formulas
 * (core/nn/cpu/sg2_cpu.c); built with -fmad=false, so they round as the
 * CPU's loops. */
#include "kernels.cuh"
#include "sg2.h"
#include "../style_mix_row.h"

static __global__ void bias_act_fwd_kernel(float *y, const float *x, const float *b, gf_bias_act_desc d)
{
	size_t n = (size_t)d.n * d.c * d.hw;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		float v = x[i] + (b ? d.bgain * b[(i / (size_t)d.hw) % (size_t)d.c] : 0.0f);
		if (d.act == GF_ACT_RELU)
			v = v > 0.0f ? v : 0.0f;
		else if (d.act == GF_ACT_LRELU)
			v = v > 0.0f ? v : v * d.alpha;
		v *= d.gain;
		if (d.clamp > 0.0f)
			v = v < -d.clamp ? -d.clamp : v > d.clamp ? d.clamp : v;
		y[i] = v;
	}
}

static __global__ void bias_act_bwd_kernel(float *dx, const float *dy, const float *y, gf_bias_act_desc d)
{
	size_t n = (size_t)d.n * d.c * d.hw;
	float lo = d.act == GF_ACT_RELU ? 0.0f : d.act == GF_ACT_LRELU ? d.alpha * d.gain : d.gain;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		float v = y[i], g = (d.act == GF_ACT_NONE || v > 0.0f) ? d.gain : lo;
		if (d.clamp > 0.0f && !(fabsf(v) < d.clamp))
			g = 0.0f;
		dx[i] = dy[i] * g;
	}
}

static __global__ void rsqrt_eps_kernel(float *y, const float *x, size_t n, float eps)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		y[i] = (float)(1.0 / sqrt((double)x[i] + (double)eps));
}

extern "C" cudaError_t gf_cu_bias_act_fwd_launch(cudaStream_t s, float *y, const float *x, const float *b,
                                                 gf_bias_act_desc d)
{
	size_t n = (size_t)d.n * d.c * d.hw;
	if (!n)
		return cudaSuccess;
	bias_act_fwd_kernel<<<gf_cu_grid(n, 4), GF_CU_THREADS, 0, s>>>(y, x, b, d);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_bias_act_bwd_launch(cudaStream_t s, float *dx, const float *dy, const float *y,
                                                 gf_bias_act_desc d)
{
	size_t n = (size_t)d.n * d.c * d.hw;
	if (!n)
		return cudaSuccess;
	bias_act_bwd_kernel<<<gf_cu_grid(n, 4), GF_CU_THREADS, 0, s>>>(dx, dy, y, d);
	return cudaGetLastError();
}

extern "C" cudaError_t gf_cu_rsqrt_eps_launch(cudaStream_t s, float *y, const float *x, size_t n, float eps)
{
	if (!n)
		return cudaSuccess;
	rsqrt_eps_kernel<<<gf_cu_grid(n), GF_CU_THREADS, 0, s>>>(y, x, n, eps);
	return cudaGetLastError();
}

/* ---- FIR resampling: the CPU's gathers (core/nn/cpu/sg2_cpu.c), one
 * thread per element, taps in the same order ---- */
static __device__ __forceinline__ int fir_src(int o, int k, const gf_fir_desc &d, int n_in)
{
	int p = o * d.down + k - d.p0;
	if (p < 0 || p % d.up)
		return -1;
	p /= d.up;
	return p < n_in ? p : -1;
}

static __device__ __forceinline__ int fir_dst(int i, int k, const gf_fir_desc &d, int n_out)
{
	int p = i * d.up + d.p0 - k;
	if (p < 0 || p % d.down)
		return -1;
	p /= d.down;
	return p < n_out ? p : -1;
}

static __global__ void fir_fwd_kernel(float *y, const float *x, gf_fir_desc d)
{
	size_t n = (size_t)d.n * d.hout * d.wout;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		int ox = (int)(i % (size_t)d.wout), oy = (int)(i / (size_t)d.wout % (size_t)d.hout);
		const float *xp = x + i / ((size_t)d.hout * d.wout) * (size_t)d.h * d.w;
		float acc = 0.0f;
		for (int ky = 0; ky < 4; ky++) {
			int iy = fir_src(oy, ky, d, d.h);
			if (iy < 0)
				continue;
			float row = 0.0f;
			for (int kx = 0; kx < 4; kx++) {
				int ix = fir_src(ox, kx, d, d.w);
				if (ix >= 0)
					row += d.f[kx] * xp[(size_t)iy * d.w + ix];
			}
			acc += d.f[ky] * row;
		}
		y[i] = acc * d.gain;
	}
}

static __global__ void fir_bwd_kernel(float *dx, const float *dy, gf_fir_desc d)
{
	size_t n = (size_t)d.n * d.h * d.w;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		int ix = (int)(i % (size_t)d.w), iy = (int)(i / (size_t)d.w % (size_t)d.h);
		const float *gp = dy + i / ((size_t)d.h * d.w) * (size_t)d.hout * d.wout;
		float acc = 0.0f;
		for (int ky = 0; ky < 4; ky++) {
			int oy = fir_dst(iy, ky, d, d.hout);
			if (oy < 0)
				continue;
			float row = 0.0f;
			for (int kx = 0; kx < 4; kx++) {
				int ox = fir_dst(ix, kx, d, d.wout);
				if (ox >= 0)
					row += d.f[kx] * gp[(size_t)oy * d.wout + ox];
			}
			acc += d.f[ky] * row;
		}
		dx[i] = acc * d.gain;
	}
}

extern "C" cudaError_t gf_cu_fir_launch(cudaStream_t s, int backward, float *y, const float *x, gf_fir_desc d)
{
	size_t n = (size_t)d.n * (backward ? (size_t)d.h * d.w : (size_t)d.hout * d.wout);
	if (!n)
		return cudaSuccess;
	if (backward)
		fir_bwd_kernel<<<gf_cu_grid(n), GF_CU_THREADS, 0, s>>>(y, x, d);
	else
		fir_fwd_kernel<<<gf_cu_grid(n), GF_CU_THREADS, 0, s>>>(y, x, d);
	return cudaGetLastError();
}

/* one thread per output element; every thread derives the batch's row
 * from u (two floats) itself */
static __global__ void style_mix_kernel(float *y, const float *x, const float *u, int n, int c, int index, int num_ws,
                                        float prob, int adjoint)
{
	size_t row = (size_t)gf_style_mix_row(u, index, num_ws, prob), C = (size_t)c;
	size_t total = (size_t)n * C * (adjoint ? 2 : 1);
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		if (!adjoint) {
			size_t b = i / C;
			y[i] = x[(2 * b + row) * C + i % C];
		} else {
			size_t b = i / (2 * C), r = (i / C) % 2;
			y[i] = r == row ? x[b * C + i % C] : 0.0f;
		}
	}
}

extern "C" cudaError_t gf_cu_style_mix_launch(cudaStream_t s, float *y, const float *x, const float *u, int n, int c,
                                              int index, int num_ws, float prob, int adjoint)
{
	size_t total = (size_t)n * (size_t)c * (adjoint ? 2 : 1);
	if (!total)
		return cudaSuccess;
	style_mix_kernel<<<gf_cu_grid(total), GF_CU_THREADS, 0, s>>>(y, x, u, n, c, index, num_ws, prob, adjoint);
	return cudaGetLastError();
}
