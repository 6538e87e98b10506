/* CUDA kernels and launchers of the recipe ops (recipe_cuda.c; their CPU
 * versions and the host arithmetic they replace: core/nn/cpu/recipe_cpu.c):
 * gradient clipping by a norm left on the device, LeCam, ADA's
 * controller, a gradient penalty's per-sample factors. Their inputs are a
 * few hundred values at most (D's outputs, a batch's lengths), so each is
 * one block that sums in a fixed order (a tree over the threads' partial
 * sums): deterministic, and equal to the CPU's loops to rounding.
 *
 * Every launcher takes the stream first and returns the launch error. */
#include <math.h>

#include "kernels.cuh"

#define RT 256 /* threads of the one-block kernels */

/* The block's sum of v, in thread order (a fixed tree); every thread gets it. */
static __device__ double block_sum(double v, double *sh)
{
	sh[threadIdx.x] = v;
	__syncthreads();
	for (unsigned h = RT / 2; h > 0; h >>= 1) {
		if (threadIdx.x < h)
			sh[threadIdx.x] += sh[threadIdx.x + h];
		__syncthreads();
	}
	double s = sh[0];
	__syncthreads();
	return s;
}

/* ==== clipping ==== */

static __global__ void clip_kernel(float *g, size_t n, const double *sumsq, float max_norm)
{
	double total = sqrt(*sumsq);
	if (!isfinite(total) || !(max_norm > 0))
		return;
	double coef = (double)max_norm / (total + 1e-6);
	if (!(coef < 1.0))
		return;
	float c = (float)coef;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		g[i] *= c;
}

extern "C" cudaError_t gf_cu_clip_launch(cudaStream_t s, float *g, size_t n, const double *sumsq, float max_norm)
{
	if (!n)
		return cudaSuccess;
	clip_kernel<<<gf_cu_grid(n, 4), GF_CU_THREADS, 0, s>>>(g, n, sumsq, max_norm);
	return cudaGetLastError();
}

/* ==== LeCam ==== */

enum { L_SET, L_REAL, L_FAKE, L_RUN_REAL, L_RUN_FAKE, L_BASE_REAL, L_BASE_FAKE };

static __global__ void lecam_kernel(float *dy, double *value, double *st, const float *out, size_t n, int fake,
                                    float lambda, float scale, int acc, const gf_cu_dyn *dyn)
{
	__shared__ double sh[RT];
	float lam = GF_CU_DYN(dyn, lecam.lambda, lambda), sc = GF_CU_DYN(dyn, lecam.scale, scale);
	int set = st[L_SET] != 0;
	double a_real = st[L_REAL], a_fake = st[L_FAKE];
	double c = 2.0 * lam * sc / (double)n, s = 0, q = 0;
	for (size_t i = threadIdx.x; i < n; i += RT) {
		s += out[i];
		if (!set)
			continue;
		double r = fake ? a_real - out[i] : out[i] - a_fake;
		r = r > 0 ? r : 0;
		q += r * r;
		dy[i] += (float)(fake ? -c * r : c * r);
	}
	s = block_sum(s, sh);
	q = block_sum(q, sh);
	if (threadIdx.x == 0) {
		st[fake ? L_RUN_FAKE : L_RUN_REAL] += s / (double)n / acc;
		*value = set ? lam * sc * q / (double)n : 0.0;
	}
}

extern "C" cudaError_t gf_cu_lecam_launch(cudaStream_t s, float *dy, double *value, double *st, const float *out,
                                          size_t n, int fake, float lambda, float scale, int acc,
                                          const gf_cu_dyn *dyn)
{
	if (!n)
		return cudaSuccess;
	lecam_kernel<<<1, RT, 0, s>>>(dy, value, st, out, n, fake, lambda, scale, acc, dyn);
	return cudaGetLastError();
}

static __global__ void lecam_avg_kernel(double *st, float decay, int last)
{
	double real = st[L_RUN_REAL] - st[L_BASE_REAL], fake = st[L_RUN_FAKE] - st[L_BASE_FAKE];
	double d = st[L_SET] != 0 ? decay : 0.0;
	st[L_REAL] = d * st[L_REAL] + (1 - d) * real;
	st[L_FAKE] = d * st[L_FAKE] + (1 - d) * fake;
	st[L_SET] = 1;
	st[L_BASE_REAL] = last ? 0 : st[L_RUN_REAL];
	st[L_BASE_FAKE] = last ? 0 : st[L_RUN_FAKE];
	if (last)
		st[L_RUN_REAL] = st[L_RUN_FAKE] = 0;
}

extern "C" cudaError_t gf_cu_lecam_avg_launch(cudaStream_t s, double *st, float decay, int last)
{
	lecam_avg_kernel<<<1, 1, 0, s>>>(st, decay, last);
	return cudaGetLastError();
}

/* ==== ADA's controller ==== */

enum { A_SIGNS, A_COUNT, A_IMAGES, A_STEPS, A_RT };

static __global__ void ada_signs_kernel(double *st, const float *out, size_t n, float mid)
{
	__shared__ double sh[RT];
	double v = 0;
	for (size_t i = threadIdx.x; i < n; i += RT)
		v += (out[i] > mid) - (out[i] < mid); /* torch.sign: 0 at 0 */
	v = block_sum(v, sh);
	if (threadIdx.x == 0) {
		st[A_SIGNS] += v;
		st[A_COUNT] += (double)n;
	}
}

extern "C" cudaError_t gf_cu_ada_signs_launch(cudaStream_t s, double *st, const float *out, size_t n, float mid)
{
	if (!n)
		return cudaSuccess;
	ada_signs_kernel<<<1, RT, 0, s>>>(st, out, n, mid);
	return cudaGetLastError();
}

static __global__ void ada_update_kernel(float *p, double *st, double *out, double images, int interval,
                                         double target, double kimg, const gf_cu_dyn *dyn)
{
	st[A_IMAGES] += GF_CU_DYN(dyn, ada.images, images);
	st[A_STEPS] += 1;
	if (st[A_STEPS] >= interval) {
		st[A_RT] = st[A_COUNT] != 0 ? st[A_SIGNS] / st[A_COUNT] : 0.0;
		if (kimg > 0) {
			double dir = (st[A_RT] > target) - (st[A_RT] < target);
			double v = (double)*p + dir * st[A_IMAGES] / (kimg * 1000.0);
			*p = (float)(v < 0 ? 0 : v > 1 ? 1 : v);
		}
		st[A_SIGNS] = st[A_COUNT] = st[A_IMAGES] = st[A_STEPS] = 0;
	}
	if (out) {
		out[0] = *p;
		out[1] = st[A_RT];
	}
}

extern "C" cudaError_t gf_cu_ada_update_launch(cudaStream_t s, float *p, double *st, double *out, double images,
                                               int interval, double target, double kimg, const gf_cu_dyn *dyn)
{
	ada_update_kernel<<<1, 1, 0, s>>>(p, st, out, images, interval, target, kimg, dyn);
	return cudaGetLastError();
}

/* ==== a gradient penalty's factors ==== */

static __device__ double length(const float *sq, int i, int max_batch, int npts)
{
	double l = 0;
	for (int k = 0; k < npts; k++)
		l += (double)sq[(size_t)k * (size_t)max_batch + (size_t)i];
	return sqrt(npts > 1 ? l / npts : l);
}

static __global__ void penalty_kernel(float *f, double *out, double *center_st, const float *sq, int b,
                                      int max_batch, int npts, int distance, double weight, double center,
                                      double decay, double scale, int split, double weight2, const gf_cu_dyn *dyn)
{
	__shared__ double sh[RT];
	double w = GF_CU_DYN(dyn, pen.weight, weight), sc = GF_CU_DYN(dyn, pen.scale, scale);
	double w2 = GF_CU_DYN(dyn, pen.weight2, weight2);
	int part = split > 0 && split < b && !distance ? split : b;
	double s = 0;
	for (int i = threadIdx.x; i < b; i += RT)
		s += length(sq, i, max_batch, npts);
	double mean = block_sum(s, sh) / b, c = center;
	if (center_st) {
		c = *center_st;
		if (decay > 0)
			c += decay * (mean - c);
	}
	double v = 0, v2 = 0;
	for (int i = threadIdx.x; i < b; i += RT) {
		double l = length(sq, i, max_batch, npts), x;
		if (!distance) {
			if (i < part) {
				v += 0.5 * l * l;
				x = w / part;
			} else {
				v2 += 0.5 * l * l;
				x = w2 / (b - part);
			}
		} else {
			v += (l - c) * (l - c);
			x = l > 0 ? 2.0 * w * (l - c) / (l * b) : 0.0;
		}
		if (npts > 1)
			x /= npts;
		f[i] = (float)(sc * x);
	}
	v = block_sum(v, sh);
	v2 = block_sum(v2, sh);
	if (threadIdx.x == 0) {
		if (center_st)
			*center_st = c;
		if (out) {
			out[0] = w * v / part;
			out[1] = mean;
			if (part < b)
				out[2] = w2 * v2 / (b - part);
		}
	}
}

extern "C" cudaError_t gf_cu_penalty_launch(cudaStream_t s, float *f, double *out, double *center_st, const float *sq,
                                            int b, int max_batch, int npts, int distance, double weight,
                                            double center, double decay, double scale, int split, double weight2,
                                            const gf_cu_dyn *dyn)
{
	penalty_kernel<<<1, RT, 0, s>>>(f, out, center_st, sq, b, max_batch, npts, distance, weight, center, decay,
	                                scale, split, weight2, dyn);
	return cudaGetLastError();
}
