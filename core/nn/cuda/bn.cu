/* CUDA batch normalisation kernels (1d and 2d over x viewed as (n, c, hw)),
 * with ReLU/LeakyReLU fused after the affine step, and their launchers.
 * The CPU version is core/nn/cpu/bn_cpu.c; the formulas are its formulas.
 *
 * Statistics: each channel's n*hw values are cut into fixed chunks
 * (gf_cu_chunks); block (chunk, channel) sums x - x0 and (x - x0)^2 in
 * double (x0: the channel's first value, so that the variance does not
 * cancel), a per-channel kernel adds the chunks in order and derives mean,
 * rstd and the running statistics, and an element-wise kernel normalises
 * and activates. The backward has the same shape (sums of dz and
 * dz (x - mean), coefficients, dx). No atomics: the same call gives the
 * same bits. */
#include <math.h>

#include "kernels.cuh"

/* ---- forward statistics ---- */

static __global__ void bn_part_kernel(double *part, const float *x, int c, uint32_t per, gf_cu_div hw)
{
	int ch = blockIdx.y;
	uint32_t e0 = blockIdx.x * GF_CU_CHUNK, e1 = min(per, e0 + GF_CU_CHUNK);
	float x0 = x[(size_t)ch * hw.d];
	double s1 = 0, s2 = 0;
	for (uint32_t e = e0 + threadIdx.x; e < e1; e += blockDim.x) {
		uint32_t smp = gf_cu_divq(hw, e), pos = e - smp * hw.d;
		float v = x[((size_t)smp * c + ch) * hw.d + pos] - x0;
		s1 += v;
		s2 += (double)v * v;
	}
	s1 = gf_cu_block_sum(s1);
	s2 = gf_cu_block_sum(s2);
	if (threadIdx.x == 0) {
		size_t k = ((size_t)ch * gridDim.x + blockIdx.x) * 2;
		part[k] = s1;
		part[k + 1] = s2;
	}
}

static __global__ void bn_stats_kernel(float *mean, float *rstd, float *run_mean, float *run_var, const double *part,
                                       const float *x, gf_bn_desc d, int chunks)
{
	int ch = blockIdx.x * blockDim.x + threadIdx.x;
	if (ch >= d.c)
		return;
	double s1 = 0, s2 = 0;
	for (int k = 0; k < chunks; k++) {
		s1 += part[((size_t)ch * chunks + k) * 2];
		s2 += part[((size_t)ch * chunks + k) * 2 + 1];
	}
	double cnt = (double)d.n * d.hw;
	double m1 = s1 / cnt;
	double var = s2 / cnt - m1 * m1;   /* biased variance, around the shifted mean */
	if (var < 0)
		var = 0;
	float m = (float)((double)x[(size_t)ch * d.hw] + m1);
	mean[ch] = m;
	rstd[ch] = (float)(1.0 / sqrt(var + d.eps));
	if (run_mean && run_var) {
		double unbiased = cnt > 1 ? var * cnt / (cnt - 1) : var;
		run_mean[ch] = (1.0f - d.momentum) * run_mean[ch] + d.momentum * m;
		run_var[ch] = (1.0f - d.momentum) * run_var[ch] + d.momentum * (float)unbiased;
	}
}

extern "C" cudaError_t gf_cu_bn_stats_launch(cudaStream_t s, float *mean, float *rstd, float *run_mean,
                                             float *run_var, double *part, const float *x, gf_bn_desc d)
{
	size_t per = (size_t)d.n * d.hw;
	if (per >= ((size_t)1 << 31) || d.c > 65535 || d.c < 1 || per < 1)
		return cudaErrorInvalidValue;
	unsigned chunks = (unsigned)gf_cu_chunks(per);
	bn_part_kernel<<<dim3(chunks, (unsigned)d.c), GF_CU_THREADS, 0, s>>>(part, x, d.c, (uint32_t)per,
	                                                                    gf_cu_div_make((uint32_t)d.hw));
	bn_stats_kernel<<<(d.c + 127) / 128, 128, 0, s>>>(mean, rstd, run_mean, run_var, part, x, d, (int)chunks);
	return cudaGetLastError();
}

/* ---- normalise and activate ---- */

static __global__ void bn_apply_kernel(float *y, const float *x, const float *mean, const float *rstd,
                                       const float *gamma, const float *beta, gf_bn_desc d, int eval, size_t total,
                                       gf_cu_div hw, gf_cu_div cdiv)
{
	float s = d.act == GF_ACT_RELU ? 0.0f : d.slope;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		uint32_t plane = gf_cu_divq(hw, (uint32_t)i);
		uint32_t ch = plane - gf_cu_divq(cdiv, plane) * cdiv.d;
		float r = eval ? 1.0f / sqrtf(rstd[ch] + d.eps) : rstd[ch];
		float g = gamma ? gamma[ch] : 1.0f, b = beta ? beta[ch] : 0.0f;
		float v = (x[i] - mean[ch]) * (g * r) + b;
		if (d.act != GF_ACT_NONE)
			v = v > 0.0f ? v : v * s;
		y[i] = v;
	}
}

extern "C" cudaError_t gf_cu_bn_apply_launch(cudaStream_t s, float *y, const float *x, const float *mean,
                                             const float *rstd, const float *gamma, const float *beta, gf_bn_desc d,
                                             int eval)
{
	size_t total = (size_t)d.n * d.c * d.hw;
	if (!total)
		return cudaSuccess;
	if (total >= ((size_t)1 << 31))
		return cudaErrorInvalidValue;
	bn_apply_kernel<<<gf_cu_grid(total, 4), GF_CU_THREADS, 0, s>>>(y, x, mean, rstd, gamma, beta, d, eval, total,
	                                                               gf_cu_div_make((uint32_t)d.hw),
	                                                               gf_cu_div_make((uint32_t)d.c));
	return cudaGetLastError();
}

/* ---- backward ---- */

/* dz: dy through the fused activation's derivative, read from the output. */
static __device__ __forceinline__ float bn_dz(float dy, const float *y, size_t i, int act, float s)
{
	return act == GF_ACT_NONE || y[i] > 0.0f ? dy : dy * s;
}

static __global__ void bn_bwd_part_kernel(double *part, const float *dy, const float *y, const float *x,
                                          const float *mean, gf_bn_desc d, uint32_t per, gf_cu_div hw)
{
	int ch = blockIdx.y;
	float s = d.act == GF_ACT_RELU ? 0.0f : d.slope, m = mean[ch];
	uint32_t e0 = blockIdx.x * GF_CU_CHUNK, e1 = min(per, e0 + GF_CU_CHUNK);
	double s1 = 0, s2 = 0;
	for (uint32_t e = e0 + threadIdx.x; e < e1; e += blockDim.x) {
		uint32_t smp = gf_cu_divq(hw, e), pos = e - smp * hw.d;
		size_t i = ((size_t)smp * d.c + ch) * hw.d + pos;
		float dz = bn_dz(dy[i], y, i, d.act, s);
		s1 += dz;
		s2 += (double)dz * (x[i] - m);
	}
	s1 = gf_cu_block_sum(s1);
	s2 = gf_cu_block_sum(s2);
	if (threadIdx.x == 0) {
		size_t k = ((size_t)ch * gridDim.x + blockIdx.x) * 2;
		part[k] = s1;
		part[k + 1] = s2;
	}
}

/* coef (c, 3): dx = k1 dz + k2 (x - mean) + k3; dgamma, dbeta. */
static __global__ void bn_bwd_coef_kernel(float *coef, float *dgamma, float *dbeta, const double *part,
                                          const float *gamma, const float *rstd, gf_bn_desc d, int chunks, int acc)
{
	int ch = blockIdx.x * blockDim.x + threadIdx.x;
	if (ch >= d.c)
		return;
	double sdz = 0, sdzx = 0;
	for (int k = 0; k < chunks; k++) {
		sdz += part[((size_t)ch * chunks + k) * 2];
		sdzx += part[((size_t)ch * chunks + k) * 2 + 1];
	}
	float r = rstd[ch];
	if (dgamma) {
		float v = (float)(sdzx * r);
		dgamma[ch] = acc ? dgamma[ch] + v : v;
	}
	if (dbeta)
		dbeta[ch] = acc ? dbeta[ch] + (float)sdz : (float)sdz;
	double cnt = (double)d.n * d.hw;
	float g = gamma ? gamma[ch] : 1.0f;
	coef[3 * ch] = g * r;
	coef[3 * ch + 1] = (float)(-(double)g * r * r * r * sdzx / cnt);
	coef[3 * ch + 2] = (float)(-(double)g * r * sdz / cnt);
}

static __global__ void bn_bwd_dx_kernel(float *dx, const float *dy, const float *y, const float *x, const float *mean,
                                        const float *coef, gf_bn_desc d, size_t total, gf_cu_div hw, gf_cu_div cdiv)
{
	float s = d.act == GF_ACT_RELU ? 0.0f : d.slope;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		uint32_t plane = gf_cu_divq(hw, (uint32_t)i);
		uint32_t ch = plane - gf_cu_divq(cdiv, plane) * cdiv.d;
		float dz = bn_dz(dy[i], y, i, d.act, s);
		dx[i] = coef[3 * ch] * dz + coef[3 * ch + 1] * (x[i] - mean[ch]) + coef[3 * ch + 2];
	}
}

extern "C" size_t gf_cu_bn_parts(const gf_bn_desc *d)
{
	return 2 * (size_t)d->c * gf_cu_chunks((size_t)d->n * d->hw) + 2 * (size_t)d->c;
}

extern "C" cudaError_t gf_cu_bn_bwd_launch(cudaStream_t s, float *dx, float *dgamma, float *dbeta, double *part,
                                           const float *dy, const float *y, const float *x, const float *gamma,
                                           const float *mean, const float *rstd, gf_bn_desc d, int acc)
{
	size_t per = (size_t)d.n * d.hw, total = per * d.c;
	if (total >= ((size_t)1 << 31) || d.c > 65535 || d.c < 1 || per < 1)
		return cudaErrorInvalidValue;
	unsigned chunks = (unsigned)gf_cu_chunks(per);
	float *coef = (float *)(void *)(part + 2 * (size_t)d.c * chunks);   /* 3c floats within 2c doubles */
	bn_bwd_part_kernel<<<dim3(chunks, (unsigned)d.c), GF_CU_THREADS, 0, s>>>(part, dy, y, x, mean, d, (uint32_t)per,
	                                                                        gf_cu_div_make((uint32_t)d.hw));
	bn_bwd_coef_kernel<<<(d.c + 127) / 128, 128, 0, s>>>(coef, dgamma, dbeta, part, gamma, rstd, d, (int)chunks, acc);
	if (dx)
		bn_bwd_dx_kernel<<<gf_cu_grid(total, 4), GF_CU_THREADS, 0, s>>>(dx, dy, y, x, mean, coef, d, total,
		                                                                gf_cu_div_make((uint32_t)d.hw),
		                                                                gf_cu_div_make((uint32_t)d.c));
	return cudaGetLastError();
}

/* ==== conditional batchnorm (layer cbn) ====
 * Statistics as batchnorm's (gf_cu_bn_stats_launch); the affine step takes
 * gamma and beta per (sample, channel) plane. Backward: one block per
 * plane sums dz and dz (x - mean) (dbeta, dgamma of that plane), a
 * per-channel kernel weights them by gamma over the batch in sample order
 * for the two batch-statistics terms of dx, then dx element-wise. */

static __global__ void cbn_apply_kernel(float *y, const float *x, const float *mean, const float *rstd,
                                        const float *gamma, const float *beta, gf_bn_desc d, int eval, size_t total,
                                        gf_cu_div hw, gf_cu_div cdiv)
{
	float s = d.act == GF_ACT_RELU ? 0.0f : d.slope;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		uint32_t plane = gf_cu_divq(hw, (uint32_t)i);
		uint32_t ch = plane - gf_cu_divq(cdiv, plane) * cdiv.d;
		float r = eval ? 1.0f / sqrtf(rstd[ch] + d.eps) : rstd[ch];
		float v = (x[i] - mean[ch]) * (gamma[plane] * r) + beta[plane];
		if (d.act != GF_ACT_NONE)
			v = v > 0.0f ? v : v * s;
		y[i] = v;
	}
}

extern "C" cudaError_t gf_cu_cbn_apply_launch(cudaStream_t s, float *y, const float *x, const float *mean,
                                              const float *rstd, const float *gamma, const float *beta, gf_bn_desc d,
                                              int eval)
{
	size_t total = (size_t)d.n * d.c * d.hw;
	if (!total)
		return cudaSuccess;
	if (total >= ((size_t)1 << 31))
		return cudaErrorInvalidValue;
	cbn_apply_kernel<<<gf_cu_grid(total, 4), GF_CU_THREADS, 0, s>>>(y, x, mean, rstd, gamma, beta, d, eval, total,
	                                                                gf_cu_div_make((uint32_t)d.hw),
	                                                                gf_cu_div_make((uint32_t)d.c));
	return cudaGetLastError();
}

/* part (n*c, 2): per plane sum dz, sum dz (x - mean); dgamma = rstd * the
 * second, dbeta = the first. */
static __global__ void cbn_bwd_plane_kernel(double *part, float *dgamma, float *dbeta, const float *dy,
                                            const float *y, const float *x, const float *mean, const float *rstd,
                                            gf_bn_desc d)
{
	size_t plane = blockIdx.x;
	int ch = (int)(plane % (size_t)d.c);
	float s = d.act == GF_ACT_RELU ? 0.0f : d.slope, m = mean[ch];
	size_t base = plane * (size_t)d.hw;
	double s1 = 0, s2 = 0;
	for (int e = threadIdx.x; e < d.hw; e += blockDim.x) {
		size_t i = base + e;
		float dz = bn_dz(dy[i], y, i, d.act, s);
		s1 += dz;
		s2 += (double)dz * (x[i] - m);
	}
	s1 = gf_cu_block_sum(s1);
	s2 = gf_cu_block_sum(s2);
	if (threadIdx.x == 0) {
		part[2 * plane] = s1;
		part[2 * plane + 1] = s2;
		dbeta[plane] = (float)s1;
		dgamma[plane] = (float)(s2 * rstd[ch]);
	}
}

/* coef (c, 2): dx = gamma[plane] rstd dz + k2 (x - mean) + k3 */
static __global__ void cbn_bwd_coef_kernel(float *coef, const double *part, const float *gamma, const float *rstd,
                                           gf_bn_desc d)
{
	int ch = blockIdx.x * blockDim.x + threadIdx.x;
	if (ch >= d.c)
		return;
	double s1 = 0, s2 = 0;
	for (int n = 0; n < d.n; n++) {
		size_t plane = (size_t)n * d.c + ch;
		s1 += (double)gamma[plane] * part[2 * plane];
		s2 += (double)gamma[plane] * part[2 * plane + 1];
	}
	double cnt = (double)d.n * d.hw, r = rstd[ch];
	coef[2 * ch] = (float)(-r * r * r * s2 / cnt);
	coef[2 * ch + 1] = (float)(-r * s1 / cnt);
}

static __global__ void cbn_bwd_dx_kernel(float *dx, const float *dy, const float *y, const float *x, const float *mean,
                                         const float *rstd, const float *gamma, const float *coef, gf_bn_desc d,
                                         size_t total, gf_cu_div hw, gf_cu_div cdiv)
{
	float s = d.act == GF_ACT_RELU ? 0.0f : d.slope;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		uint32_t plane = gf_cu_divq(hw, (uint32_t)i);
		uint32_t ch = plane - gf_cu_divq(cdiv, plane) * cdiv.d;
		float dz = bn_dz(dy[i], y, i, d.act, s);
		dx[i] = gamma[plane] * rstd[ch] * dz + coef[2 * ch] * (x[i] - mean[ch]) + coef[2 * ch + 1];
	}
}

extern "C" size_t gf_cu_cbn_parts(const gf_bn_desc *d)
{
	return 2 * (size_t)d->n * d->c + (size_t)d->c;   /* part, then 2c floats of coef within c doubles */
}

extern "C" cudaError_t gf_cu_cbn_bwd_launch(cudaStream_t s, float *dx, float *dgamma, float *dbeta, double *part,
                                            const float *dy, const float *y, const float *x, const float *gamma,
                                            const float *mean, const float *rstd, gf_bn_desc d)
{
	size_t planes = (size_t)d.n * d.c, total = planes * d.hw;
	if (total >= ((size_t)1 << 31) || d.c < 1 || d.hw < 1 || planes < 1)
		return cudaErrorInvalidValue;
	float *coef = (float *)(void *)(part + 2 * planes);
	cbn_bwd_plane_kernel<<<(unsigned)planes, d.hw >= 256 ? 256 : 64, 0, s>>>(part, dgamma, dbeta, dy, y, x, mean,
	                                                                         rstd, d);
	if (dx) {
		cbn_bwd_coef_kernel<<<(d.c + 127) / 128, 128, 0, s>>>(coef, part, gamma, rstd, d);
		cbn_bwd_dx_kernel<<<gf_cu_grid(total, 4), GF_CU_THREADS, 0, s>>>(dx, dy, y, x, mean, rstd, gamma, coef, d,
		                                                                 total, gf_cu_div_make((uint32_t)d.hw),
		                                                                 gf_cu_div_make((uint32_t)d.c));
	}
	return cudaGetLastError();
}
