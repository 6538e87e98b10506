/* StyleGAN2 kernels of the CUDA backend (launchers called from
 * sg2_cuda.c): bias + activation with gain and clamping, its backward
 * from the output, and 1 / sqrt(x + eps). Element-wise, the CPU's formulas
 * (core/nn/cpu/sg2_cpu.c); built with -fmad=false, so they round as the
 * CPU's loops. */
#include "kernels.cuh"
#include "sg2.h"

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
