/* Double-backward kernels of the CUDA backend (launchers called from
 * dbwd_cuda.c): the activations' second derivative, batch normalisation's
 * double backward, max pooling's gather and the minibatch standard
 * deviation. The formulas are the CPU backend's (core/nn/cpu/dbwd_cpu.c,
 * which derives them); every reduction runs in one block in a fixed order,
 * in double. */
#include "kernels.cuh"
#include "dbwd.h"

/* ---- activations ---- */

static __global__ void act_bwd2_kernel(float *dx, const float *t, const float *dy, const float *y, size_t n, int act)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		float v = y[i], c;
		if (act == GF_ACT_TANH)
			c = -2.0f * v * (1.0f - v * v);
		else if (act == GF_ACT_SIGMOID)
			c = v * (1.0f - v) * (1.0f - 2.0f * v);
		else
			c = 0.0f;
		dx[i] = t[i] * dy[i] * c;
	}
}

extern "C" cudaError_t gf_cu_act_bwd2_launch(cudaStream_t s, float *dx, const float *t, const float *dy, const float *y,
                                             size_t n, int act)
{
	if (!n)
		return cudaSuccess;
	act_bwd2_kernel<<<gf_cu_grid(n, 4), GF_CU_THREADS, 0, s>>>(dx, t, dy, y, n, act);
	return cudaGetLastError();
}

/* ---- batch normalisation ---- */

static __device__ __forceinline__ float bn2_mask(int act, float slope, const float *y, size_t i)
{
	return act == 0 || y[i] > 0.0f ? 1.0f : act == 1 ? 0.0f : slope;
}

/* The block's sum of v, in every thread. */
static __device__ double block_total(double v)
{
	__shared__ double tot;
	v = gf_cu_block_sum(v);
	if (threadIdx.x == 0)
		tot = v;
	__syncthreads();
	double r = tot;
	__syncthreads();
	return r;
}

static __global__ void bn_bwd2_kernel(float *ty, float *dx, float *dgamma, const float *t, const float *dy,
                                      const float *y, const float *x, const float *gamma, const float *mean,
                                      const float *rstd, int n, int c, int hw, int act, float slope, int acc)
{
	int ch = blockIdx.x;
	size_t per = (size_t)n * hw;
	float m = mean[ch];
	double rs = rstd[ch], g = gamma ? gamma[ch] : 1.0, cnt = (double)per;
	double st = 0, sd = 0, stx = 0, sdx = 0, std_ = 0;
	for (size_t j = threadIdx.x; j < per; j += blockDim.x) {
		size_t i = ((j / hw) * c + ch) * hw + j % hw;
		double dz = dy[i] * bn2_mask(act, slope, y, i), xc = x[i] - m;
		st += t[i];
		sd += dz;
		stx += t[i] * xc;
		sdx += dz * xc;
		std_ += t[i] * dz;
	}
	st = block_total(st);
	sd = block_total(sd);
	stx = block_total(stx);
	sdx = block_total(sdx);
	std_ = block_total(std_);
	double pt = stx * rs, pd = sdx * rs;
	if (dgamma && threadIdx.x == 0) {
		float v = (float)(rs * (std_ - st * sd / cnt - pt * pd / cnt));
		dgamma[ch] = acc ? dgamma[ch] + v : v;
	}
	float b1 = (float)(g * rs), b2 = (float)(-g * rs * rs * pt / cnt), b3 = (float)(-g * rs * st / cnt);
	double k = g * rs * rs / cnt;
	float a1 = (float)(k * rs * (3.0 * pt * pd / cnt - std_ + st * sd / cnt)), a2 = (float)(-k * pd),
	      a3 = (float)(-k * pt), a4 = (float)(k * (pd * st + pt * sd) / cnt);
	for (size_t j = threadIdx.x; j < per; j += blockDim.x) {
		size_t i = ((j / hw) * c + ch) * hw + j % hw;
		float mk = bn2_mask(act, slope, y, i);
		if (ty)
			ty[i] = mk * (b1 * t[i] + b2 * (x[i] - m) + b3);
		if (dx)
			dx[i] = a1 * (x[i] - m) + a2 * t[i] + a3 * (dy[i] * mk) + a4;
	}
}

extern "C" cudaError_t gf_cu_bn_bwd2_launch(cudaStream_t s, float *ty, float *dx, float *dgamma, const float *t,
                                            const float *dy, const float *y, const float *x, const float *gamma,
                                            const float *mean, const float *rstd, int n, int c, int hw, int act,
                                            float slope, int acc)
{
	if (c <= 0 || n <= 0 || hw <= 0)
		return cudaSuccess;
	bn_bwd2_kernel<<<(unsigned)c, GF_CU_THREADS, 0, s>>>(ty, dx, dgamma, t, dy, y, x, gamma, mean, rstd, n, c, hw, act,
	                                                      slope, acc);
	return cudaGetLastError();
}

/* ---- max pooling's gather ---- */

static __global__ void pool_gather_kernel(float *y, const float *x, const int32_t *idx, size_t total, size_t in,
                                          size_t out)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		size_t pl = i / out;
		int32_t at = idx[i];
		y[i] = at >= 0 ? x[pl * in + (size_t)at] : 0.0f;
	}
}

extern "C" cudaError_t gf_cu_pool_gather_launch(cudaStream_t s, float *y, const float *x, const int32_t *idx,
                                                gf_pooling_desc d)
{
	size_t out = (size_t)d.hout * d.wout, total = (size_t)d.n * d.c * out;
	if (!total)
		return cudaSuccess;
	pool_gather_kernel<<<gf_cu_grid(total, 4), GF_CU_THREADS, 0, s>>>(y, x, idx, total, (size_t)d.h * d.w, out);
	return cudaGetLastError();
}

/* ---- minibatch standard deviation ---- */

#define MBSTD_MAX_G 64

static __global__ void mbstd_kernel(int op, float *y, float *dx, const float *x, const float *dy, const float *t,
                                    gf_mbstd_desc d)
{
	int G = d.group, m = d.n / G, cs = d.c / d.f;
	int k = blockIdx.x / d.f, f = blockIdx.x % d.f;
	size_t hw = (size_t)d.h * d.w, ci = (size_t)d.c * hw, co = (size_t)(d.c + d.f) * hw, L = (size_t)cs * hw;
	size_t base = (size_t)f * cs * hw;
	double ds = 0;
	if (op) {
		for (size_t j = threadIdx.x; j < (size_t)G * hw; j += blockDim.x) {
			size_t g = j / hw, q = j % hw;
			ds += dy[(g * m + k) * co + (size_t)(d.c + f) * hw + q];
		}
		ds = block_total(ds);
	}
	double K = ds / ((double)G * (double)L), stat = 0;
	for (size_t q = threadIdx.x; q < L; q += blockDim.x) {
		double xs[MBSTD_MAX_G];
		double mu = 0, var = 0;
		for (int g = 0; g < G; g++) {
			xs[g] = x[(size_t)(g * m + k) * ci + base + q];
			mu += xs[g];
		}
		mu /= G;
		for (int g = 0; g < G; g++) {
			xs[g] -= mu;
			var += xs[g] * xs[g];
		}
		double sd = sqrt(var / G + d.eps);
		if (op == 0) {
			stat += sd;
		} else if (op == 1) {
			for (int g = 0; g < G; g++)
				dx[(size_t)(g * m + k) * ci + base + q] =
					(float)(dy[(size_t)(g * m + k) * co + base + q] + K * xs[g] / sd);
		} else {
			double tm = 0, at = 0;
			for (int g = 0; g < G; g++) {
				double tv = t[(size_t)(g * m + k) * ci + base + q];
				tm += tv;
				at += tv * xs[g];
			}
			tm /= G;
			stat += at / (G * sd);
			for (int g = 0; dx && g < G; g++) {
				double tv = t[(size_t)(g * m + k) * ci + base + q];
				dx[(size_t)(g * m + k) * ci + base + q] = (float)(K * ((tv - tm) / sd - at * xs[g] / (G * sd * sd * sd)));
			}
		}
	}
	if (op == 1 || !y)
		return;
	float v = (float)(block_total(stat) / (double)L);
	const float *src = op == 0 ? x : t;
	for (size_t j = threadIdx.x; j < (size_t)G * L; j += blockDim.x) {
		size_t g = j / L, q = j % L, i = g * m + k;
		y[i * co + base + q] = src[i * ci + base + q];
	}
	for (size_t j = threadIdx.x; j < (size_t)G * hw; j += blockDim.x) {
		size_t g = j / hw, q = j % hw, i = g * m + k;
		y[i * co + (size_t)(d.c + f) * hw + q] = v;
	}
}

extern "C" cudaError_t gf_cu_mbstd_launch(cudaStream_t s, int op, float *y, float *dx, const float *x, const float *dy,
                                          const float *t, gf_mbstd_desc d)
{
	if (d.group > MBSTD_MAX_G)
		return cudaErrorInvalidValue;
	unsigned tasks = (unsigned)((d.n / d.group) * d.f);
	if (!tasks)
		return cudaSuccess;
	mbstd_kernel<<<tasks, GF_CU_THREADS, 0, s>>>(op, y, dx, x, dy, t, d);
	return cudaGetLastError();
}
